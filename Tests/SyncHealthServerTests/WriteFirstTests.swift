import Foundation
import Hummingbird
import HummingbirdTesting
import SyncHealthCore
import SyncHealthEngine
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

    func post(_ client: any TestClientProtocol, _ events: [String]) async throws -> (accepted: Int, duplicates: Int) {
        let body = try json(try await client.post(batch(device: "d", events)))
        return (body["accepted"] as? Int ?? -1, body["duplicates"] as? Int ?? -1)
    }

    @Test(
        "a known device's next batch is one round trip; an id recorded before (here or on another replica) is still a duplicate; the other replica's write in between is kept"
    )
    func knownDevices() async throws {
        let url = try await PostgresTesting.freshDatabase()
        let storeA = try PostgresStore(url: url, logger: testLogger())
        let storeB = try PostgresStore(url: url, logger: testLogger())
        let a = TestService(store: .shared(storeA), configuration: Self.configuration)
        let b = TestService(store: .shared(storeB), configuration: Self.configuration)
        let network = #""kind": "network", "available": true"#
        let started = #""kind": "activity", "phase": "export", "state": "started""#
        try await a.test { clientA in
            try await b.test { clientB in
                #expect(try await post(clientA, [event("e1", network)]) == (1, 0))
                // A read and wrote the device: the next batch is the write alone.
                var trips = storeA.groupRoundTrips
                #expect(try await post(clientA, [event("e2", "2026-11-22T10:00:01Z", started)]) == (1, 0))
                #expect(storeA.groupRoundTrips - trips == 1)
                // Written first with e2 as new, refused since e2 is recorded; read, it is a duplicate.
                #expect(try await post(clientA, [event("e2", "2026-11-22T10:00:01Z", started)]) == (0, 1))

                // B breaks the device; A's copy is now a version behind.
                #expect(try await post(clientB, [event("e3", "2026-11-22T10:00:02Z", urgentError)]) == (1, 0))
                trips = storeA.groupRoundTrips
                #expect(try await post(clientA, [event("e4", "2026-11-22T10:00:03Z", network)]) == (1, 0))
                #expect(storeA.groupRoundTrips - trips == 3, "a refused write, a read, a write")
                // e3 was recorded by B and never read by A as seen.
                #expect(try await post(clientA, [event("e3", "2026-11-22T10:00:02Z", urgentError)]) == (0, 1))

                // B's failure stands on both replicas, and the fleet counts hold the device once.
                let onA = try json(try await clientA.get("/v1/devices/d?appId=com.example.notes"))
                let onB = try json(try await clientB.get("/v1/devices/d?appId=com.example.notes"))
                #expect(onA["syncStateSummary"] as? String == "error")
                #expect(NSDictionary(dictionary: onA) == NSDictionary(dictionary: onB))
                for client in [clientA, clientB] {
                    let summary = try json(try await client.get("/v1/summary"))
                    #expect(summary["devices"] as? Int == 1)
                    #expect(summary["broken"] as? Int == 1)
                }
            }
        }
    }

    @Test("with no devices remembered (replica-cache-devices 0), every group reads first")
    func noCache() async throws {
        var configuration = Self.configuration
        configuration.sharedCacheDevices = 0
        let store = try PostgresStore(url: try await PostgresTesting.freshDatabase(), logger: testLogger())
        let service = TestService(store: .shared(store), configuration: configuration)
        try await service.test { client in
            try await client.post(batch(device: "warm", healthyEvents))
            for i in 0..<5 {
                let trips = store.groupRoundTrips
                #expect(try await post(client, [event("e\(i)", #""kind": "network", "available": true"#)]) == (1, 0))
                #expect(store.groupRoundTrips - trips == 2)
            }
        }
    }

    @Test("after a restart, devices the store has but the replica never met are read before they are written")
    func restartReadsFirst() async throws {
        let url = try await PostgresTesting.freshDatabase()
        let first = TestService(store: .shared(try PostgresStore(url: url, logger: testLogger())), configuration: Self.configuration)
        try await first.test { client in
            for i in 0..<10 { try await client.post(batch(device: "known-\(i)", healthyEvents)) }
        }
        let store = try PostgresStore(url: url, logger: testLogger())
        let again = TestService(store: .shared(store), configuration: Self.configuration)
        try await again.test { client in
            for i in 0..<10 {
                let trips = store.groupRoundTrips
                let body = try json(
                    try await client.post(batch(device: "known-\(i)", [event("more-\(i)", #""kind": "network", "available": true"#)]))
                )
                #expect(body["accepted"] as? Int == 1)
                // The first group also loads the webhook subscriptions.
                let expected = i == 0 ? 3 : 2
                #expect(store.groupRoundTrips - trips == expected, "known-\(i): a read, then the write")
            }
            // Every one of them was stored: still read first.
            #expect(try json(try await client.get("/v1/summary"))["devices"] as? Int == 10)
        }
    }
}
