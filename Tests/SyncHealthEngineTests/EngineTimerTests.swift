import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthSQLite
import SyncHealthStore
import SyncHealthTestSupport
import Testing

/// The embedded stores, made fresh.
@Suite("Engine timers: alerts fire on the service clock without new events")
struct EngineTimerTests {
    static let key = DeviceKey(appId: "com.example.notes", deviceId: "dev-1")

    @Test("notSyncing fires at exactly 60 s on the injected clock, and not a microsecond before")
    func notSyncingTimer() async throws {
        try await EngineHarness().run { h in
            try await h.post(batch(notSyncingEvents))
            try await h.advance(by: .seconds(60) - .microseconds(1))
            #expect(try await h.firing(.notSyncing).isEmpty)
            try await h.advance(by: .microseconds(1))
            // A positive check waits: a loop woken by the post may still be finishing its pass when the clock moves.
            #expect(try await eventually { try await !h.firing(.notSyncing).isEmpty })
            let alert = try #require(try await h.firing(.notSyncing).first)
            #expect(alert.startsAt == testStart + .seconds(60))
            #expect(alert.deviceId == "dev-1")
            // Import starts: the alert resolves.
            try await h.post(batch([event("i", "2026-11-22T10:01:05Z", #""kind": "activity", "phase": "import", "state": "started""#)]))
            #expect(try await h.firing(.notSyncing).isEmpty)
        }
    }

    @Test("syncError for a transient error fires after the configured delay")
    func configuredDelay() async throws {
        var configuration = EngineConfiguration()
        configuration.alerts.errorAfter = .seconds(5)
        try await EngineHarness(configuration: configuration).run { h in
            try await h.post(
                batch([
                    event("n", #""kind": "network", "available": true"#),
                    event("f", #""kind": "activity", "phase": "import", "state": "failed", "error": {"domain": "CKErrorDomain", "code": 4}"#),
                ])
            )
            #expect(try await h.firing(.syncError).isEmpty)
            try await h.advance(by: .seconds(5))
            #expect(try await eventually { try await h.firing(.syncError).count == 1 })
        }
    }

    @Test("a device becomes silent after the silence window, and the fleet summary counts it")
    func silence() async throws {
        try await EngineHarness().run { h in
            try await h.post(batch(healthyEvents))
            try await h.advance(by: .seconds(86_400))
            #expect(try await eventually { try await h.engine.summary(FleetScope()).silent == 1 })
            #expect(try await h.engine.device(Self.key)?.silent == true)
            // It posts again: active.
            try await h.post(batch([event("hb", "2026-11-23T10:00:00Z", #""kind": "heartbeat""#)]))
            #expect(try await h.engine.summary(FleetScope()).active == 1)
        }
    }

    @Test("fleetDegraded fires when more than 10% of 20 active devices of a container break")
    func fleetDegraded() async throws {
        try await EngineHarness().run { h in
            for i in 0..<18 { try await h.post(batch(device: "ok-\(i)", healthyEvents)) }
            for i in 0..<2 { try await h.post(batch(device: "bad-\(i)", notSyncingEvents)) }
            #expect(try await h.firing(.fleetDegraded).isEmpty, "2 of 20 is exactly 10%")
            try await h.post(batch(device: "bad-2", notSyncingEvents))
            let fleet = try await h.firing(.fleetDegraded)
            #expect(fleet.count == 1)
            #expect(fleet.first?.containerId == "iCloud.com.example.notes")
            #expect(fleet.first?.deviceId == nil)
        }
    }

    @Test("a delay that was running when the engine stopped fires at the right time after a restart")
    func timerSurvivesRestart() async throws {
        let dir = temporaryDirectory()
        func store() throws -> MonitorStore { .local(try SQLiteStore(directory: dir, synchronous: .normal)) }
        try await EngineHarness(store: try store()).run { h in try await h.post(batch(notSyncingEvents)) }
        // Restarted 30 s later: the alert is due 30 s after that, not 60.
        try await EngineHarness(store: try store(), clock: ManualClock(testStart + .seconds(30))).run { h in
            #expect(try await h.engine.device(Self.key)?.record.monitor.summary == .notSyncing)
            try await h.advance(by: .seconds(30) - .microseconds(1))
            #expect(try await h.firing(.notSyncing).isEmpty)
            try await h.advance(by: .microseconds(1))
            #expect(try await eventually { try await h.firing(.notSyncing).count == 1 })
        }
        // Restarted long after the deadline: it fires at once, and only once.
        try await EngineHarness(store: try store(), clock: ManualClock(testStart + .seconds(3600))).run { h in
            let fired = try await eventually { try await h.firing(.notSyncing).count == 1 }
            #expect(fired)
            #expect(try await h.engine.alerts(AlertQuery(kind: .notSyncing)).alerts.count == 1)
        }
    }

    @Test("expired event ids are forgotten an hour on, in batches between groups, until none is left", arguments: EngineStore.allCases)
    func pruneInBatches(kind: EngineStore) async throws {
        var configuration = EngineConfiguration()
        configuration.dedupeRetention = .seconds(60)
        configuration.pruneBatchSize = 2
        try await EngineHarness(store: try await kind.make(), configuration: configuration).run { h in
            try await h.post(batch(healthyEvents))
            #expect(try await h.post(batch(healthyEvents)).duplicates == 5, "remembered within the retention")
            // An hour on, the next group starts a pass; its batches of 2 run until the 5 ids are gone, with no
            // further request to drive them. The other device's ids, recorded now, stay.
            try await h.advance(by: .seconds(3601))
            try await h.post(batch(device: "other", healthyEvents))
            let ids = ["h1", "h2", "h3", "h4", "h5"]
            let other = DeviceKey(appId: "com.example.notes", deviceId: "other")
            let forgotten = try await eventually { try await h.store.seenEventIds([(Self.key, ids)]) == [[]] }
            #expect(forgotten)
            #expect(try await h.store.seenEventIds([(other, ids)]) == [Set(ids)])
            #expect(try await h.post(batch(healthyEvents)).duplicates == 0)
        }
    }

    @Test("a restart on the same data directory keeps devices, counters, dedupe and lookups by id")
    func restartKeepsState() async throws {
        let dir = temporaryDirectory()
        func store() throws -> MonitorStore { .local(try SQLiteStore(directory: dir, synchronous: .normal)) }
        try await EngineHarness(store: try store()).run { h in
            for i in 0..<3 { try await h.post(batch(device: "d\(i)", healthyEvents)) }
        }
        try await EngineHarness(store: try store()).run { h in
            #expect(try await h.engine.summary(FleetScope()).devices == 3)
            // Found by id alone (without the app) after the restart too.
            #expect(try await h.engine.devices(withId: "d1").count == 1)
            let again = try await h.post(batch(device: "d0", healthyEvents))
            #expect(again.duplicates == 5 && again.accepted == 0)
        }
    }
}
