import Foundation
import NIOCore
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthPostgres
import SyncHealthSQLite
import SyncHealthStore
import SyncHealthTestSupport
import SyncHealthWebhooks
import Synchronization
import Testing

extension EngineHarness {
    /// Whether every message written so far has been delivered (none waits in the outbox): after this, a count of
    /// deliveries is final for what was posted, with no wait on the wall clock.
    func drained() async throws -> Bool {
        try await outboxDrained(store)
    }

    /// The deliveries made, once the outbox is drained.
    func deliveredWhenDrained() async throws -> Int {
        #expect(try await eventually { try await drained() }, "the outbox drains")
        return transport.sent.withLock { $0.count }
    }

    /// Creates a silence on the engine, as `POST /v1/silences` does.
    @discardableResult
    func silence(_ matchers: Silence.Matchers, endsAt: Timestamp = testStart + .seconds(86_400 * 365)) async throws -> Silence {
        try await delivery.silences.create(matchers: matchers, startsAt: nil, endsAt: endsAt, comment: "")
    }
}

@Suite("Engine: silences hold deliveries, and release them when they end")
struct EngineSilenceTests {
    static func breakDevice(_ h: EngineHarness, _ device: String, version: String = "3.4") async throws {
        let app = "com.example.notes"
        try await h.post(
            ByteBuffer(
                string:
                    #"{"device": {"deviceId": "\#(device)", "appId": "\#(app)", "containerId": "iCloud.\#(app)", "appVersion": "\#(version)"}, "events": [\#(event("n", #""kind": "network", "available": true"#)), \#(event("f", "2026-11-22T10:00:01Z", urgentError))]}"#
            )
        )
    }

    static func recover(_ h: EngineHarness, _ device: String) async throws {
        try await h.post(batch(device: device, [event("s", "2026-11-22T10:00:05Z", #""kind": "activity", "phase": "export", "state": "started""#)]))
    }

    /// The silences that hold `device`'s firing alert now, as `GET /v1/alerts` lists them.
    static func silencedBy(_ h: EngineHarness, _ device: String) async throws -> [String]? {
        let key = DeviceKey(appId: "com.example.notes", deviceId: device)
        guard let snapshot = try await h.engine.device(key), let alert = snapshot.alerts.first else { return nil }
        return h.delivery.silences.silencedBy(alert, info: snapshot.record.info, now: h.clock.now)
    }

    @Test("a silenced alert still fires, held by the silence and not delivered; ending the silence delivers it then, once")
    func heldThenReleased() async throws {
        try await EngineHarness(webhooks: .privateAllowed).run { h in
            try await h.subscribe()
            let silence = try await h.silence(Silence.Matchers(appId: "com.example.notes", appVersion: "3.4"))
            try await Self.breakDevice(h, "held")
            try await Self.breakDevice(h, "other-version", version: "3.5")
            #expect(try await h.deliveredWhenDrained() == 1, "only the device the silence does not match")
            #expect(try await Self.silencedBy(h, "held") == [silence.id], "still fires, held by the silence")
            #expect(try await Self.silencedBy(h, "other-version") == [])

            h.clock.advance(by: .seconds(5))
            #expect(try await h.delivery.silences.expire(silence.id) != nil)
            #expect(try await eventually { h.transport.sent.withLock { $0.count } == 2 }, "delivered once the silence ended")
            let released = try #require(h.payloads.last)
            #expect(released["type"] as? String == "alert.firing")
            #expect((released["data"] as? [String: Any])?["deviceId"] as? String == "held")
            #expect((released["data"] as? [String: Any])?["silencedBy"] == nil, "webhook bodies do not carry silencedBy")
            #expect(try await h.deliveredWhenDrained() == 2, "exactly once")
        }
    }

    @Test("an alert that fired and resolved under a silence is never delivered, even after the silence ends by its time")
    func resolvedMeanwhile() async throws {
        try await EngineHarness(webhooks: .privateAllowed).run { h in
            try await h.subscribe()
            try await h.silence(Silence.Matchers(deviceId: "brief"), endsAt: testStart + .seconds(600))
            try await Self.breakDevice(h, "brief")
            try await Self.recover(h, "brief")
            // The release runs at the silence's end.
            try await h.clock.advanceAndSettle(by: .seconds(601))
            #expect(try await h.deliveredWhenDrained() == 0)
            // A device that breaks now, after the silence, is delivered as usual.
            try await Self.breakDevice(h, "brief-2")
            #expect(try await h.deliveredWhenDrained() == 1)
        }
    }

    @Test("an alert delivered before a silence still has its resolve delivered during it; one fired under it does not")
    func resolveFollowsDeliveredFire() async throws {
        try await EngineHarness(webhooks: .privateAllowed).run { h in
            try await h.subscribe()
            try await Self.breakDevice(h, "early")
            #expect(try await h.deliveredWhenDrained() == 1)
            h.clock.advance(by: .seconds(5))
            try await h.silence(Silence.Matchers(appId: "com.example.notes"), endsAt: testStart + .seconds(600))
            try await Self.breakDevice(h, "late")
            try await Self.recover(h, "late")
            try await Self.recover(h, "early")
            #expect(try await h.deliveredWhenDrained() == 2, "nothing for the alert that fired and resolved under the silence")
            let resolved = try #require(h.payloads.last)
            #expect(resolved["type"] as? String == "alert.resolved" && (resolved["data"] as? [String: Any])?["deviceId"] as? String == "early")
        }
    }

    @Test("a silenced fleetDegraded is told once when its silence ends, on its container's line, then its resolve")
    func fleetReleased() async throws {
        try await EngineHarness(webhooks: .privateAllowed).run { h in
            try await h.subscribe()
            let silence = try await h.silence(Silence.Matchers(kind: .fleetDegraded))
            h.clock.advance(by: .seconds(1))
            for i in 0..<18 { try await h.post(batch(device: "ok-\(i)", healthyEvents)) }
            for i in 0..<3 { try await h.post(batch(device: "bad-\(i)", notSyncingEvents)) }
            #expect(try await eventually { try await h.firing(.fleetDegraded).count == 1 })
            func fleet() -> [String?] {
                h.payloads.filter { ($0["data"] as? [String: Any])?["kind"] as? String == "fleetDegraded" }.map { $0["type"] as? String }
            }
            _ = try await h.deliveredWhenDrained()
            #expect(fleet().isEmpty, "held")
            h.clock.advance(by: .seconds(1))
            _ = try await h.delivery.silences.expire(silence.id)
            #expect(try await eventually { fleet() == ["alert.firing"] }, "told when the silence ends")
            for i in 0..<3 {
                try await h.post(
                    batch(device: "bad-\(i)", [event("i\(i)", "2026-11-22T10:01:00Z", #""kind": "activity", "phase": "import", "state": "started""#)])
                )
            }
            #expect(try await eventually { fleet() == ["alert.firing", "alert.resolved"] }, "then its resolve, once")
        }
    }

    @Test("a silence survives a restart")
    func survivesRestart() async throws {
        let directory = temporaryDirectory()
        func store() throws -> MonitorStore { .local(try SQLiteStore(directory: directory, synchronous: .normal)) }
        try await EngineHarness(store: try store(), webhooks: .privateAllowed).run { h in
            try await h.subscribe()
            try await h.silence(Silence.Matchers(appId: "com.example.notes"))
        }
        try await EngineHarness(store: try store(), webhooks: .privateAllowed).run { h in
            #expect(try await h.delivery.silences.list().count == 1)
            try await Self.breakDevice(h, "after-restart")
            #expect(try await h.firing(.syncError).count == 1)
            #expect(try await h.deliveredWhenDrained() == 0, "still silenced after the restart")
        }
    }

    @Test("on two replicas over one PostgreSQL database, a silence created on one holds on the other", .enabled(if: PostgresTesting.baseURL != nil))
    func replicasAgree() async throws {
        let url = try await PostgresTesting.freshDatabase()
        @Sendable func store() throws -> MonitorStore { .shared(try PostgresStore(url: url, logger: testLogger())) }
        try await EngineHarness(store: try store(), webhooks: .privateAllowed).run { a in
            try await a.subscribe()
            let silence = try await a.silence(Silence.Matchers(containerId: "iCloud.com.example.notes"))
            try await EngineHarness(store: try store(), webhooks: .privateAllowed).run { b in
                #expect(try await b.delivery.silences.get(silence.id)?.id == silence.id)
                try await Self.breakDevice(b, "on-b")
                #expect(try await Self.silencedBy(b, "on-b") == [silence.id])
                #expect(
                    try await b.deliveredWhenDrained() == 0 && a.transport.sent.withLock { $0.count } == 0,
                    "the replica that did not create it holds it too"
                )
            }
        }
    }
}
