import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthPostgres
import SyncHealthStore
import SyncHealthTestSupport
import SyncHealthWebhooks
import Synchronization
import Testing

@testable import SyncHealthServer

/// The delivered payloads, in order.
func payloads(_ transport: RecordingTransport) -> [[String: Any]] {
    transport.sent.withLock { $0 }.compactMap { try? JSONSerialization.jsonObject(with: Data($0.body)) as? [String: Any] }
}

@Suite("Webhook notification policy, end to end", .serialized)
struct NotificationPolicyServiceTests {
    static var allowPrivate: WebhookConfiguration {
        var c = WebhookConfiguration()
        c.allowPrivate = true
        return c
    }

    @Test("a flapping device is told once, then its settled state after a quiet window", arguments: EngineStore.withShared)
    func flapping(_ kind: EngineStore) async throws {
        let transport = RecordingTransport()
        let service = TestService(store: try await kind.make(), transport: transport, webhooks: Self.allowPrivate)
        try await service.test { client in
            _ = try await createWebhook(client, url: "http://127.0.0.1:9/hook")
            for i in 0..<6 {
                // Within the 5-minute skew tolerance of the frozen test clock.
                let t0 = "2026-11-22T10:00:\(10 + i * 8)Z"
                let t1 = "2026-11-22T10:00:\(14 + i * 8)Z"
                try await client.post(batch([event("n\(i)", t0, #""kind": "network", "available": true"#), event("f\(i)", t0, urgentError)]))
                service.clock.advance(by: .seconds(1))
                try await client.post(batch([event("s\(i)", t1, #""kind": "activity", "phase": "export", "state": "started""#)]))
                // Each incident starts at its own instant, so has its own id (a frozen clock would give all six one).
                service.clock.advance(by: .seconds(1))
            }
            #expect(try await eventually { payloads(transport).count == 7 })
            try await Task.sleep(for: .milliseconds(200))
            let sent = payloads(transport)
            #expect(sent.count == 7, "3 fire/resolve pairs, then one flapping fire; the rest held")
            #expect(
                sent.map { $0["type"] as? String } == [
                    "alert.firing", "alert.resolved", "alert.firing", "alert.resolved",
                    "alert.firing", "alert.resolved", "alert.firing",
                ]
            )
            let flapNotice = (sent.last?["data"] as? [String: Any])?["detail"] as? String
            #expect(flapNotice?.contains("Flapping") == true)
            // Quiet for an hour: ops last heard "firing", the alert is resolved, so the resolve goes out.
            service.clock.advance(by: .seconds(3600))
            // (The export left in progress for an hour also raises a real syncStalled; only syncError counts here.)
            func syncErrors() -> [[String: Any]] { payloads(transport).filter { ($0["data"] as? [String: Any])?["kind"] as? String == "syncError" } }
            #expect(try await eventually { syncErrors().count == 8 })
            #expect(syncErrors().last?["type"] as? String == "alert.resolved")
            // The history has every incident, each resolved, the flapping one included.
            let history = try json(try await client.get("/v1/alerts?kind=syncError"))["data"] as? [[String: Any]]
            #expect(history?.count == 6)
            #expect(history?.allSatisfy { $0["state"] as? String == "resolved" } == true)
        }
    }

    /// The `i`th syncError of dev-1: an urgent export failure, 8 s after the one before.
    static func fire(_ i: Int) -> ByteBuffer {
        batch([
            event("n\(i)", "2026-11-22T10:00:\(10 + i * 8)Z", #""kind": "network", "available": true"#),
            event("f\(i)", "2026-11-22T10:00:\(10 + i * 8)Z", urgentError),
        ])
    }

    /// Three fire/resolve pairs of dev-1's syncError, one (frozen) second apart: not yet flapping.
    static func fireAndRecoverThrice(_ client: any TestClientProtocol, _ service: TestService) async throws {
        for i in 0..<3 {
            try await client.post(fire(i))
            service.clock.advance(by: .seconds(1))
            try await client.post(
                batch([event("s\(i)", "2026-11-22T10:00:\(14 + i * 8)Z", #""kind": "activity", "phase": "export", "state": "started""#)])
            )
            service.clock.advance(by: .seconds(1))
        }
    }

    @Test("a group whose commit fails takes back its flap counting: the retried fire is the 4th, told as flapping once")
    func failedCommitTakesBackDecisions() async throws {
        let transport = RecordingTransport()
        let store = InMemoryStore()
        let service = TestService(store: .local(store), transport: transport, webhooks: Self.allowPrivate)
        try await service.test { client in
            _ = try await createWebhook(client, url: "http://127.0.0.1:9/hook")
            try await Self.fireAndRecoverThrice(client, service)
            #expect(try await eventually { payloads(transport).count == 6 })
            store.failNextCommit(with: CancellationError())
            #expect(try await client.post(Self.fire(3)).status == .serviceUnavailable)
            #expect(try await client.post(Self.fire(3)).status == .accepted)
            #expect(try await eventually { payloads(transport).count == 7 })
            // Had the failed attempt counted, the retry would be the 5th fire, past the threshold already: held back.
            let notice = (payloads(transport).last?["data"] as? [String: Any])?["detail"] as? String
            #expect(notice?.contains("Flapping") == true)
        }
    }

    @Test(
        "on PostgreSQL, a group whose transaction fails takes back its flap counting: retried or failed, the 4th fire is told as flapping once",
        .enabled(if: PostgresTesting.baseURL != nil),
        arguments: ["40001", "P0001"]
    )
    func failedSharedTransactionTakesBackDecisions(_ sqlState: String) async throws {
        let url = try await PostgresTesting.freshDatabase()
        let transport = RecordingTransport()
        let service = TestService(
            store: .shared(try PostgresStore(url: url, logger: testLogger())),
            transport: transport,
            webhooks: Self.allowPrivate
        )
        try await service.test { client in
            _ = try await createWebhook(client, url: "http://127.0.0.1:9/hook")
            try await Self.fireAndRecoverThrice(client, service)
            #expect(try await eventually { payloads(transport).count == 6 })
            // The next write of an alert fails once, after the group has decided: a serialization failure (40001)
            // is a refused write, and the group reads and plans again within the request; any other error fails
            // the request. A sequence counts the attempts, since it is the one thing a rolled-back write does not
            // take back.
            try await PostgresTesting.execute(
                [
                    "CREATE SEQUENCE refusals",
                    """
                    CREATE FUNCTION refuse_once() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN
                        IF nextval('refusals') = 1 THEN RAISE EXCEPTION 'refused by the test' USING ERRCODE = '\(sqlState)'; END IF;
                        RETURN NEW;
                    END $$
                    """,
                    "CREATE TRIGGER refuse_once BEFORE INSERT OR UPDATE ON alerts FOR EACH ROW EXECUTE FUNCTION refuse_once()",
                ],
                on: url
            )
            if sqlState != "40001" {
                #expect(try await client.post(Self.fire(3)).status == .serviceUnavailable)
            }
            #expect(try await client.post(Self.fire(3)).status == .accepted)
            #expect(try await eventually { payloads(transport).count == 7 })
            // Had the failed attempt counted, the one that succeeded would be the 5th fire: held back, not told.
            let notice = (payloads(transport).last?["data"] as? [String: Any])?["detail"] as? String
            #expect(notice?.contains("Flapping") == true)
        }
    }

    @Test(
        "a subscription that groups by device hears of every device alert while fleetDegraded fires, and of the fleet alert itself",
        arguments: EngineStore.withShared
    )
    func fleetAlertBesideDevices(_ kind: EngineStore) async throws {
        let transport = RecordingTransport()
        let service = TestService(store: try await kind.make(), transport: transport, webhooks: Self.allowPrivate)
        try await service.test { client in
            _ = try await createWebhook(client, url: "http://127.0.0.1:9/hook")
            func told(_ kind: String, _ type: String = "alert.firing") -> Int {
                payloads(transport).count { $0["type"] as? String == type && ($0["data"] as? [String: Any])?["kind"] as? String == kind }
            }
            for i in 0..<20 { try await client.post(batch(device: "ok-\(i)", healthyEvents)) }
            for i in 0..<5 {
                try await client.post(
                    batch(
                        device: "bad-\(i)",
                        [event("n", #""kind": "network", "available": true"#), event("f", "2026-11-22T10:00:01Z", urgentError)]
                    )
                )
            }
            #expect(try await eventually { told("fleetDegraded") == 1 && told("syncError") == 5 }, "3 of 23 broken fires the fleet alert")
            for i in 0..<5 {
                try await client.post(
                    batch(
                        device: "bad-\(i)",
                        [
                            event("s", "2026-11-22T10:00:09Z", #""kind": "activity", "phase": "export", "state": "succeeded""#),
                            event("i", "2026-11-22T10:00:09Z", #""kind": "activity", "phase": "import", "state": "succeeded""#),
                        ]
                    )
                )
            }
            #expect(try await eventually { told("fleetDegraded", "alert.resolved") == 1 && told("syncError", "alert.resolved") == 5 })
        }
    }
}
