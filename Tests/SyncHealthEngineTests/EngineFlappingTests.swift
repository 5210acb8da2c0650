import Foundation
import NIOCore
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthPostgres
@_spi(Testing) import SyncHealthStore
import SyncHealthTestSupport
import SyncHealthWebhooks
import Synchronization
import Testing

extension EngineHarness {
    /// The webhook bodies delivered so far, in order.
    var payloads: [[String: Any]] {
        transport.sent.withLock { $0 }.compactMap { try? JSONSerialization.jsonObject(with: Data($0.body)) as? [String: Any] }
    }

    /// Subscribes a Standard Webhooks receiver on loopback to every alert.
    func subscribe(_ url: String = "http://127.0.0.1:9/hook") async throws {
        _ = try await delivery.webhooks.create(WebhookRequestFields(url: url))
    }
}

@Suite("Engine: flapping, and the fleet alert beside device alerts")
struct EngineFlappingTests {
    /// The `i`th syncError of the device: an urgent export failure, 8 s after the one before.
    static func fire(_ i: Int) -> ByteBuffer {
        batch([
            event("n\(i)", "2026-11-22T10:00:\(10 + i * 8)Z", #""kind": "network", "available": true"#),
            event("f\(i)", "2026-11-22T10:00:\(10 + i * 8)Z", urgentError),
        ])
    }

    /// Its recovery, 4 s after the `i`th fire.
    static func recover(_ i: Int) -> ByteBuffer {
        batch([event("s\(i)", "2026-11-22T10:00:\(14 + i * 8)Z", #""kind": "activity", "phase": "export", "state": "started""#)])
    }

    /// Three fire/resolve pairs, each at its own instant (a frozen clock would give all of them one alert id).
    static func fireAndRecoverThrice(_ h: EngineHarness) async throws {
        for i in 0..<3 {
            try await h.post(fire(i))
            h.clock.advance(by: .seconds(1))
            try await h.post(recover(i))
            h.clock.advance(by: .seconds(1))
        }
    }

    @Test("a flapping device is told once, then its settled state after a quiet window", arguments: EngineStore.withShared)
    func flapping(_ kind: EngineStore) async throws {
        try await EngineHarness(store: try await kind.make(), webhooks: .privateAllowed).run { h in
            try await h.subscribe()
            try await Self.fireAndRecoverThrice(h)
            for i in 3..<6 {
                try await h.post(Self.fire(i))
                h.clock.advance(by: .seconds(1))
                try await h.post(Self.recover(i))
                h.clock.advance(by: .seconds(1))
            }
            // A line's messages are delivered in order: the checks after the settled resolve below also show that
            // nothing held came out before it.
            #expect(try await eventually { h.payloads.count == 7 })
            let sent = h.payloads
            #expect(
                sent.map { $0["type"] as? String } == [
                    "alert.firing", "alert.resolved", "alert.firing", "alert.resolved",
                    "alert.firing", "alert.resolved", "alert.firing",
                ],
                "3 fire/resolve pairs, then one flapping fire; the rest held"
            )
            #expect(((sent.last?["data"] as? [String: Any])?["detail"] as? String)?.contains("Flapping") == true)
            // Quiet for an hour: ops last heard "firing", the alert is resolved, so the resolve goes out.
            try await h.clock.advanceAndSettle(by: .seconds(3600))
            // (The export left in progress for an hour also raises a real syncStalled; only syncError counts here.)
            func syncErrors() -> [[String: Any]] { h.payloads.filter { ($0["data"] as? [String: Any])?["kind"] as? String == "syncError" } }
            #expect(try await eventually { syncErrors().count == 8 })
            #expect(syncErrors().map { $0["type"] as? String }.suffix(2) == ["alert.firing", "alert.resolved"], "nothing held came out between")
            // The history has every alert, each resolved, the flapping one included.
            let history = try await h.engine.alerts(AlertQuery(kind: .syncError)).alerts
            #expect(history.count == 6 && history.allSatisfy { $0.state == .resolved })
        }
    }

    @Test("a group whose commit fails takes back its flap counting: the retried fire is the 4th, told as flapping once")
    func failedCommitTakesBackDecisions() async throws {
        let store = InMemoryStore()
        try await EngineHarness(store: .local(store), webhooks: .privateAllowed).run { h in
            try await h.subscribe()
            try await Self.fireAndRecoverThrice(h)
            #expect(try await eventually { h.payloads.count == 6 })
            store.failNextCommit(with: CancellationError())
            await #expect(throws: EngineError.self) { try await h.post(Self.fire(3)) }
            try await h.post(Self.fire(3))
            #expect(try await eventually { h.payloads.count == 7 })
            // Had the failed attempt counted, the retry would be the 5th fire, past the threshold already: held back.
            #expect(((h.payloads.last?["data"] as? [String: Any])?["detail"] as? String)?.contains("Flapping") == true)
        }
    }

    @Test(
        "on PostgreSQL, a group whose transaction fails takes back its flap counting: retried or failed, the 4th fire is told as flapping once",
        .enabled(if: PostgresTesting.baseURL != nil),
        arguments: ["40001", "P0001"]
    )
    func failedSharedTransactionTakesBackDecisions(_ sqlState: String) async throws {
        let url = try await PostgresTesting.freshDatabase()
        let store = MonitorStore.shared(try PostgresStore(url: url, logger: testLogger()))
        try await EngineHarness(store: store, webhooks: .privateAllowed).run { h in
            try await h.subscribe()
            try await Self.fireAndRecoverThrice(h)
            #expect(try await eventually { h.payloads.count == 6 })
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
                await #expect(throws: EngineError.self) { try await h.post(Self.fire(3)) }
            }
            try await h.post(Self.fire(3))
            #expect(try await eventually { h.payloads.count == 7 })
            // Had the failed attempt counted, the one that succeeded would be the 5th fire: held back, not told.
            #expect(((h.payloads.last?["data"] as? [String: Any])?["detail"] as? String)?.contains("Flapping") == true)
        }
    }

    @Test(
        "a subscription that groups by device hears of every device alert while fleetDegraded fires, and of the fleet alert itself",
        arguments: EngineStore.withShared
    )
    func fleetAlertBesideDevices(_ kind: EngineStore) async throws {
        try await EngineHarness(store: try await kind.make(), webhooks: .privateAllowed).run { h in
            try await h.subscribe()
            func told(_ kind: String, _ type: String = "alert.firing") -> Int {
                h.payloads.count { $0["type"] as? String == type && ($0["data"] as? [String: Any])?["kind"] as? String == kind }
            }
            for i in 0..<20 { try await h.post(batch(device: "ok-\(i)", healthyEvents)) }
            for i in 0..<5 {
                try await h.post(
                    batch(
                        device: "bad-\(i)",
                        [event("n", #""kind": "network", "available": true"#), event("f", "2026-11-22T10:00:01Z", urgentError)]
                    )
                )
            }
            #expect(try await eventually { told("fleetDegraded") == 1 && told("syncError") == 5 }, "5 of 25 broken fires the fleet alert")
            for i in 0..<5 {
                try await h.post(
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
