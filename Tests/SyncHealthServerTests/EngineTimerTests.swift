import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthSQLite
import SyncHealthStore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthServer

/// Firing alerts of a kind, through the API.
func firing(_ client: any TestClientProtocol, kind: AlertKind) async throws -> [[String: Any]] {
    try json(try await client.get("/v1/alerts?state=firing&kind=\(kind.rawValue)"))["data"] as? [[String: Any]] ?? []
}

@Suite("Engine timers: alerts fire on the service clock without new events")
struct EngineTimerTests {
    @Test("notSyncing fires at exactly 60 s on the injected clock, and not a microsecond before")
    func notSyncingTimer() async throws {
        let service = TestService()
        try await service.test { client in
            try await client.post(batch(notSyncingEvents))
            try await advance(service.clock, by: .seconds(60) - .microseconds(1))
            #expect(try await firing(client, kind: .notSyncing).isEmpty)
            service.clock.advance(by: .microseconds(1))
            #expect(try await eventually { try await !firing(client, kind: .notSyncing).isEmpty })
            let alert = try #require(try await firing(client, kind: .notSyncing).first)
            #expect(alert["startsAt"] as? String == (testStart + .seconds(60)).rfc3339)
            // Import starts: the alert resolves.
            try await client.post(batch([event("i", "2026-11-22T10:01:05Z", #""kind": "activity", "phase": "import", "state": "started""#)]))
            #expect(try await firing(client, kind: .notSyncing).isEmpty)
        }
    }

    @Test("syncError for a transient error fires after the configured delay")
    func configuredDelay() async throws {
        var configuration = EngineConfiguration()
        configuration.alerts.errorAfter = .seconds(5)
        let service = TestService(configuration: configuration)
        try await service.test { client in
            try await client.post(
                batch([
                    event("n", #""kind": "network", "available": true"#),
                    event("f", #""kind": "activity", "phase": "import", "state": "failed", "error": {"domain": "CKErrorDomain", "code": 4}"#),
                ])
            )
            #expect(try await firing(client, kind: .syncError).isEmpty)
            service.clock.advance(by: .seconds(5))
            #expect(try await eventually { try await !firing(client, kind: .syncError).isEmpty })
        }
    }

    @Test("a device becomes silent after the silence window, and the fleet summary counts it")
    func silence() async throws {
        let service = TestService()
        try await service.test { client in
            try await client.post(batch(healthyEvents))
            service.clock.advance(by: .seconds(86_400))
            #expect(try await eventually { try json(try await client.get("/v1/summary"))["silent"] as? Int == 1 })
            #expect(try json(try await client.get("/v1/devices/dev-1"))["silent"] as? Bool == true)
            // It posts again: active.
            try await client.post(batch([event("hb", "2026-11-23T10:00:00Z", #""kind": "heartbeat""#)]))
            #expect(try json(try await client.get("/v1/summary"))["active"] as? Int == 1)
        }
    }

    @Test("fleetDegraded fires when more than 10% of 20 active devices of a container break")
    func fleetDegraded() async throws {
        let service = TestService()
        try await service.test { client in
            for i in 0..<18 { try await client.post(batch(device: "ok-\(i)", healthyEvents)) }
            for i in 0..<2 { try await client.post(batch(device: "bad-\(i)", notSyncingEvents)) }
            #expect(try await firing(client, kind: .fleetDegraded).isEmpty, "2 of 20 is exactly 10%")
            try await client.post(batch(device: "bad-2", notSyncingEvents))
            let fleet = try await firing(client, kind: .fleetDegraded)
            #expect(fleet.count == 1)
            #expect(fleet.first?["containerId"] as? String == "iCloud.com.example.notes")
            #expect(fleet.first?["deviceId"] is NSNull)
        }
    }

    @Test("a delay that was running when the server stopped fires at the right time after a restart")
    func timerSurvivesRestart() async throws {
        let dir = temporaryDirectory()
        let first = TestService(store: .local(try SQLiteStore(directory: dir, synchronous: .normal)))
        try await first.test { client in
            try await client.post(batch(notSyncingEvents))
        }
        // Restarted 30 s later: the alert is due 30 s after that, not 60.
        let clock = ManualClock(testStart + .seconds(30))
        let second = TestService(store: .local(try SQLiteStore(directory: dir, synchronous: .normal)), clock: clock)
        try await second.test { client in
            #expect(try json(try await client.get("/v1/devices/dev-1"))["syncStateSummary"] as? String == "notSyncing")
            try await advance(clock, by: .seconds(30) - .microseconds(1))
            #expect(try await firing(client, kind: .notSyncing).isEmpty)
            clock.advance(by: .microseconds(1))
            #expect(try await eventually { try await !firing(client, kind: .notSyncing).isEmpty })
        }
        // Restarted long after the deadline: it fires at once, and only once.
        let late = ManualClock(testStart + .seconds(3600))
        let third = TestService(store: .local(try SQLiteStore(directory: dir, synchronous: .normal)), clock: late)
        try await third.test { client in
            #expect(try await eventually { try await firing(client, kind: .notSyncing).count == 1 })
            let all = try json(try await client.get("/v1/alerts?kind=notSyncing"))["data"] as? [Any]
            #expect(all?.count == 1)
        }
    }

    @Test(
        "expired event ids are forgotten an hour on, in batches between groups, until none is left",
        arguments: EngineStore.allCases
    )
    func pruneInBatches(store: EngineStore) async throws {
        var configuration = EngineConfiguration()
        configuration.dedupeRetention = .seconds(60)
        configuration.pruneBatchSize = 2
        let service = TestService(store: try await store.make(), configuration: configuration)
        try await service.test { client in
            try await client.post(batch(healthyEvents))
            let repeated = try json(try await client.post(batch(healthyEvents)))
            #expect(repeated["duplicates"] as? Int == 5, "remembered within the retention")
            // An hour on, the next group starts a pass; its batches of 2 run until the 5 ids are gone, with no
            // further request to drive them. The other device's ids, recorded now, stay.
            service.clock.advance(by: .seconds(3601))
            try await client.post(batch(device: "other", healthyEvents))
            let ids = ["h1", "h2", "h3", "h4", "h5"]
            let first = DeviceKey(appId: "com.example.notes", deviceId: "dev-1")
            let other = DeviceKey(appId: "com.example.notes", deviceId: "other")
            #expect(try await eventually { try await service.store.seenEventIds([(first, ids)]) == [[]] })
            #expect(try await service.store.seenEventIds([(other, ids)]) == [Set(ids)])
            let replay = try json(try await client.post(batch(healthyEvents)))
            #expect(replay["duplicates"] as? Int == 0)
        }
    }

    @Test("a restart on the same data directory keeps devices, counters, dedupe and lookups by id")
    func restartKeepsState() async throws {
        let dir = temporaryDirectory()
        let first = TestService(store: .local(try SQLiteStore(directory: dir, synchronous: .normal)))
        try await first.test { client in
            for i in 0..<3 { try await client.post(batch(device: "d\(i)", healthyEvents)) }
        }
        let second = TestService(store: .local(try SQLiteStore(directory: dir, synchronous: .normal)))
        try await second.test { client in
            #expect(try json(try await client.get("/v1/summary"))["devices"] as? Int == 3)
            // Found by id alone (without appId) after the restart too.
            #expect(try await client.get("/v1/devices/d1").status == .ok)
            let again = try json(try await client.post(batch(device: "d0", healthyEvents)))
            #expect(again["duplicates"] as? Int == 5)
            #expect(again["accepted"] as? Int == 0)
        }
    }
}
