import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthPostgres
import SyncHealthSQLite
import SyncHealthStore
import SyncHealthTestSupport
import SyncHealthWebhooks
import Testing

@testable import SyncHealthServer

/// What a reader sees of a device that left: the checks every removal test makes, on any replica.
enum RemovalChecks {
    static let app = "com.example.notes"

    static func erase(_ client: any TestClientProtocol, _ device: String, key: String = adminKey) async throws -> TestResponse {
        try await client.execute(uri: "/v1/devices/\(device)?appId=\(app)", method: .delete, headers: headers(key))
    }

    /// The device is unknown, uncounted, unlisted, and (when `alertsGone`) has no alert at all.
    static func expectGone(_ client: any TestClientProtocol, _ device: String, devices: Int, alertsGone: Bool = true) async throws {
        #expect(try await client.get("/v1/devices/\(device)?appId=\(app)").status == .notFound)
        #expect(try await client.get("/v1/devices/\(device)").status == .notFound)
        let summary = try json(try await client.get("/v1/summary"))
        #expect(summary["devices"] as? Int == devices)
        #expect(summary["broken"] as? Int == 0)
        let listed = try json(try await client.get("/v1/devices?limit=1000"))["data"] as? [[String: Any]] ?? []
        #expect(!listed.contains { $0["deviceId"] as? String == device })
        #expect(listed.count == devices)
        if alertsGone {
            let alerts = try json(try await client.get("/v1/alerts?deviceId=\(device)"))["data"] as? [Any] ?? ["?"]
            #expect(alerts.isEmpty)
        }
        #expect(try await firing(client, kind: .syncError).isEmpty)
    }
}

@Suite("Retention and erasure through the API")
struct DeviceRemovalEndpointTests {
    @Test(
        "with forgetAfter 3s, a device silent for longer leaves the summary and the lists, and its alert resolves as forgotten",
        arguments: EngineStore.withShared
    )
    func retention(store: EngineStore) async throws {
        var configuration = EngineConfiguration()
        configuration.forgetAfter = .seconds(3)
        let service = TestService(store: try await store.make(), configuration: configuration)
        try await service.test { client in
            try await IncidentTests.breakDevice(client, "gone")
            try await client.post(batch(device: "stays", healthyEvents))
            #expect(try await firing(client, kind: .syncError).count == 1)
            try await service.clock.advanceAndSettle(by: .seconds(2))
            try await client.post(batch(device: "stays", [event("k1", #""kind": "network", "available": true"#)]))
            try await service.clock.advanceAndSettle(by: .seconds(2))
            #expect(try await eventually { try json(try await client.get("/v1/summary"))["devices"] as? Int == 1 })
            try await RemovalChecks.expectGone(client, "gone", devices: 1, alertsGone: false)
            let alerts = try json(try await client.get("/v1/alerts?deviceId=gone"))["data"] as? [[String: Any]] ?? []
            #expect(alerts.count == 1)
            #expect(alerts.first?["state"] as? String == "resolved")
            #expect(alerts.first?["reason"] as? String == "forgotten")
            #expect((alerts.first?["detail"] as? String)?.contains("forgotten") == true)
            #expect(try await client.get("/v1/devices/stays?appId=\(RemovalChecks.app)").status == .ok)
        }
    }

    @Test(
        "resolved alerts older than alertRetention leave the history at the next hourly pass; firing ones stay",
        arguments: EngineStore.withShared
    )
    func alertHistoryRetention(store: EngineStore) async throws {
        var configuration = EngineConfiguration()
        configuration.alertRetention = .seconds(60)
        configuration.pruneBatchSize = 1
        let service = TestService(store: try await store.make(), configuration: configuration)
        try await service.test { client in
            for device in ["old-1", "old-2", "firing"] { try await IncidentTests.breakDevice(client, device) }
            // A healthy device: its export succeeds after the failure.
            let healthy = [
                event("r1", #""kind": "account", "status": "available""#),
                event("r2", "2026-11-22T10:00:02Z", #""kind": "activity", "phase": "setup", "state": "succeeded""#),
                event("r3", "2026-11-22T10:00:03Z", #""kind": "activity", "phase": "import", "state": "succeeded""#),
                event("r4", "2026-11-22T10:00:04Z", #""kind": "activity", "phase": "export", "state": "succeeded""#),
            ]
            for device in ["old-1", "old-2"] { try await client.post(batch(device: device, healthy)) }
            #expect(try await firing(client, kind: .syncError).count == 1)
            #expect((try json(try await client.get("/v1/alerts"))["data"] as? [Any])?.count == 3)
            // An hour on, a pass starts; its batches of one run until both resolved alerts are gone.
            try await service.clock.advanceAndSettle(by: .seconds(3_601))
            try await client.post(batch(device: "other", healthyEvents))
            #expect(try await eventually { (try json(try await client.get("/v1/alerts"))["data"] as? [Any])?.count == 1 })
            let left = try json(try await client.get("/v1/alerts"))["data"] as? [[String: Any]] ?? []
            #expect(left.map { $0["deviceId"] as? String } == ["firing"])
        }
    }

    @Test("DELETE erases a device: 204, then no trace in reads or queued messages, its ids new again; after a restart too")
    func erasureOnSQLite() async throws {
        let dir = temporaryDirectory()
        let first = TestService(
            store: .local(try SQLiteStore(directory: dir, synchronous: .normal)),
            transport: CurlTransport(totalTimeout: .seconds(1)),
            webhooks: .privateAllowed
        )
        try await first.test { client in
            // A receiver that is not there: the device's messages stay queued.
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/hook"}"#)
            try await IncidentTests.breakDevice(client, "erase-me")
            try await client.post(batch(device: "stays", healthyEvents))
            #expect(try await first.store.dueMessages(now: testStart + .seconds(86_400), limit: 100).count == 1)

            #expect(try await RemovalChecks.erase(client, "erase-me", key: readKey).status == .forbidden)
            let noApp = try await client.execute(uri: "/v1/devices/erase-me", method: .delete, headers: headers(adminKey))
            #expect(noApp.status == .badRequest)
            #expect(try await RemovalChecks.erase(client, "erase-me").status == .noContent)
            try await RemovalChecks.expectGone(client, "erase-me", devices: 1)
            #expect(try await first.store.dueMessages(now: testStart + .seconds(86_400), limit: 100).isEmpty, "its queued message was dropped")
            #expect(try await RemovalChecks.erase(client, "erase-me").status == .noContent, "an erasure asked again succeeds")
        }
        let second = TestService(store: .local(try SQLiteStore(directory: dir, synchronous: .normal)))
        try await second.test { client in
            try await RemovalChecks.expectGone(client, "erase-me", devices: 1)
            second.clock.advance(by: .seconds(10))
            try await IncidentTests.breakDevice(client, "erase-me")
            let device = try json(try await client.get("/v1/devices/erase-me?appId=\(RemovalChecks.app)"))
            #expect(device["firstSeenAt"] as? String == (testStart + .seconds(10)).rfc3339, "a later post starts a new record")
            #expect(try await firing(client, kind: .syncError).count == 1, "its events were new: the alert fired again")
        }
    }
}

@Suite("Erasure on two PostgreSQL replicas", .serialized, .enabled(if: PostgresTesting.baseURL != nil))
struct SharedErasureTests {
    @Test("a device erased through one replica is gone on both, and after a restart; a later post makes a new record")
    func erasureAcrossReplicas() async throws {
        let (replica, clock) = try await Self.replicas()
        let (a, b) = (try replica(), try replica())
        try await a.test { clientA in
            try await b.test { clientB in
                try await IncidentTests.breakDevice(clientA, "erase-me")
                try await client(clientB, posts: "erase-me")
                try await clientB.post(batch(device: "stays", healthyEvents))
                #expect(try await RemovalChecks.erase(clientA, "erase-me").status == .noContent)
                for client in [clientA, clientB] { try await RemovalChecks.expectGone(client, "erase-me", devices: 1) }
            }
        }
        let c = try replica()
        try await c.test { client in
            try await RemovalChecks.expectGone(client, "erase-me", devices: 1)
            clock.advance(by: .seconds(10))
            try await IncidentTests.breakDevice(client, "erase-me")
            let device = try json(try await client.get("/v1/devices/erase-me?appId=\(RemovalChecks.app)"))
            #expect(device["firstSeenAt"] as? String == (testStart + .seconds(10)).rfc3339, "a later post starts a new record")
            #expect(try await firing(client, kind: .syncError).count == 1, "its event ids were erased: the events are new")
        }
    }

    @Test("a replica that remembers an erased device does not bring it back when the device posts again")
    func staleReplicaDoesNotResurrect() async throws {
        let (replica, clock) = try await Self.replicas()
        let (a, b) = (try replica(), try replica())
        try await a.test { clientA in
            try await b.test { clientB in
                // B reads and writes the device a few times, so that it remembers it and may write first.
                try await IncidentTests.breakDevice(clientB, "erase-me")
                for i in 0..<5 { try await clientB.post(batch(device: "erase-me", [event("w\(i)", #""kind": "network", "available": true"#)])) }
                #expect(try await RemovalChecks.erase(clientA, "erase-me").status == .noContent)
                clock.advance(by: .seconds(10))
                // Another device first takes the fleet pass that follows a clock move (a group that reads), so that
                // the next group may write first from what B remembers.
                try await clientB.post(batch(device: "other", healthyEvents))
                try await clientB.post(batch(device: "erase-me", [event("after", #""kind": "network", "available": true"#)]))
                let device = try json(try await clientA.get("/v1/devices/erase-me?appId=\(RemovalChecks.app)"))
                #expect(device["firstSeenAt"] as? String == (testStart + .seconds(10)).rfc3339, "not the erased record")
                #expect(try await firing(clientA, kind: .syncError).isEmpty, "the erased error is not back")
            }
        }
    }

    /// A maker of replicas on one fresh database, sharing one manual clock.
    static func replicas() async throws -> (make: @Sendable () throws -> TestService, clock: ManualClock) {
        let url = try await PostgresTesting.freshDatabase()
        let clock = ManualClock(testStart)
        return ({ TestService(store: .shared(try PostgresStore(url: url, logger: testLogger())), clock: clock) }, clock)
    }

    /// Posts one more event for `device`, so that this replica has read and written it.
    func client(_ client: any TestClientProtocol, posts device: String) async throws {
        try await client.post(batch(device: device, [event("seen-by-b", #""kind": "network", "available": true"#)]))
    }
}
