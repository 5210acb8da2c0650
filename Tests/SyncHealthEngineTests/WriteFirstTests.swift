import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthPostgres
import SyncHealthTestSupport
import Testing

@Suite(
    "A replica writes first what it knows: one round trip, and nothing another replica wrote is lost",
    .serialized,
    .enabled(if: PostgresTesting.baseURL != nil)
)
struct WriteFirstTests {
    /// Timers and fleet passes never come due on the manual clock, so that only what the cache knows decides.
    static var configuration: EngineConfiguration {
        var configuration = EngineConfiguration()
        configuration.sharedPollInterval = .seconds(3600)
        return configuration
    }

    static let device = DeviceKey(appId: "com.example.notes", deviceId: "d")

    func post(_ h: EngineHarness, _ events: [String]) async throws -> (accepted: Int, duplicates: Int) {
        let receipt = try await h.post(batch(device: "d", events))
        return (receipt.accepted, receipt.duplicates)
    }

    @Test(
        "a known device's next batch is one round trip; an id recorded before (here or on another replica) is still a duplicate; the other replica's write in between is kept"
    )
    func knownDevices() async throws {
        let url = try await PostgresTesting.freshDatabase()
        let storeA = try PostgresStore(url: url, logger: testLogger())
        let storeB = try PostgresStore(url: url, logger: testLogger())
        let network = #""kind": "network", "available": true"#
        let started = #""kind": "activity", "phase": "export", "state": "started""#
        try await EngineHarness(store: .shared(storeA), configuration: Self.configuration).run { a in
            try await EngineHarness(store: .shared(storeB), configuration: Self.configuration).run { b in
                // A's first group (its first fleet pass) runs as soon as it is ready: once it has ended, no post
                // below can be taken into it (a fleet pass reads, so a post in it costs two trips).
                #expect(try await eventually { storeA.groupRoundTrips > 0 })
                #expect(try await post(a, [event("e1", network)]) == (1, 0))
                // A read and wrote the device: the next batch is the write alone.
                var trips = storeA.groupRoundTrips
                #expect(try await post(a, [event("e2", "2026-11-22T10:00:01Z", started)]) == (1, 0))
                #expect(storeA.groupRoundTrips - trips == 1)
                // Written first with e2 as new, refused since e2 is recorded; read, it is a duplicate.
                #expect(try await post(a, [event("e2", "2026-11-22T10:00:01Z", started)]) == (0, 1))

                // B breaks the device; A's copy is now a version behind.
                #expect(try await post(b, [event("e3", "2026-11-22T10:00:02Z", urgentError)]) == (1, 0))
                trips = storeA.groupRoundTrips
                #expect(try await post(a, [event("e4", "2026-11-22T10:00:03Z", network)]) == (1, 0))
                #expect(storeA.groupRoundTrips - trips == 3, "a refused write, a read, a write")
                // e3 was recorded by B and never read by A as seen.
                #expect(try await post(a, [event("e3", "2026-11-22T10:00:02Z", urgentError)]) == (0, 1))

                // B's failure stands on both replicas, and the fleet counts hold the device once.
                let onA = try await a.engine.device(Self.device)?.record
                let onB = try await b.engine.device(Self.device)?.record
                #expect(onA?.monitor.summary == .error)
                #expect(onA == onB)
                for h in [a, b] {
                    let summary = try await h.engine.summary(.all)
                    #expect(summary.devices == 1 && summary.broken == 1)
                }
            }
        }
    }

    @Test("with no devices remembered (replica-cache-devices 0), every group reads first")
    func noCache() async throws {
        var configuration = Self.configuration
        configuration.sharedCacheDevices = 0
        let store = try PostgresStore(url: try await PostgresTesting.freshDatabase(), logger: testLogger())
        try await EngineHarness(store: .shared(store), configuration: configuration).run { h in
            try await h.post(batch(device: "warm", healthyEvents))
            for i in 0..<5 {
                let trips = store.groupRoundTrips
                #expect(try await post(h, [event("e\(i)", #""kind": "network", "available": true"#)]) == (1, 0))
                #expect(store.groupRoundTrips - trips == 2)
            }
        }
    }

    @Test("after a restart, devices the store has but the replica never met are read before they are written")
    func restartReadsFirst() async throws {
        let url = try await PostgresTesting.freshDatabase()
        try await EngineHarness(store: .shared(try PostgresStore(url: url, logger: testLogger())), configuration: Self.configuration).run { h in
            for i in 0..<10 { try await h.post(batch(device: "known-\(i)", healthyEvents)) }
        }
        let store = try PostgresStore(url: url, logger: testLogger())
        try await EngineHarness(store: .shared(store), configuration: Self.configuration).run { h in
            // The engine's first group (its first fleet pass, which also loads the subscriptions) runs as soon as
            // it is ready: counted from its end, so that it cannot fall inside a post's count or take a post in.
            // A group's trips are added when it ends.
            #expect(try await eventually { store.groupRoundTrips > 0 })
            for i in 0..<10 {
                let trips = store.groupRoundTrips
                let receipt = try await h.post(batch(device: "known-\(i)", [event("more-\(i)", #""kind": "network", "available": true"#)]))
                #expect(receipt.accepted == 1)
                #expect(store.groupRoundTrips - trips == 2, "known-\(i): a read, then the write")
            }
            // Every one of them was stored: still read first.
            #expect(try await h.engine.summary(.all).devices == 10)
        }
    }
}
