import Foundation
import NIOCore
import NIOFoundationEssentialsCompat
import SyncHealthCore
import SyncHealthStore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthEngine

@Suite("A group's plan, without a server")
struct GroupPlanTests {
    static let hook = WebhookSubscription(
        id: "wh_1",
        url: "http://127.0.0.1:9/hook",
        kinds: [],
        description: nil,
        secret: "s",
        createdAt: testStart
    )

    static func decoded(_ body: ByteBuffer) throws -> EventBatch {
        try EventBatch.decode(json: Data(buffer: body))
    }

    static func make(_ batches: [EventBatch]) -> GroupPlan {
        var policy = NotificationPolicy()
        return GroupPlan.make(
            batches: batches,
            seen: batches.map { _ in [] },
            due: [],
            devices: DeviceTable(),
            fleetAlerts: FleetAlerts(),
            policy: &policy,
            now: testStart,
            configuration: EngineConfiguration(),
            subscribers: { _, _ in [hook] }
        )
    }

    @Test("one device's fire, resolve and fire again in one group are one incident, told once as firing")
    func requestsOfOneDeviceAreEvaluatedTogether() throws {
        let fire = try Self.decoded(
            batch([
                event("n0", "2026-11-22T10:00:10Z", #""kind": "network", "available": true"#),
                event("f0", "2026-11-22T10:00:10Z", urgentError),
            ])
        )
        let recover = try Self.decoded(batch([event("s0", "2026-11-22T10:00:14Z", #""kind": "activity", "phase": "export", "state": "started""#)]))
        let fireAgain = try Self.decoded(batch([event("f1", "2026-11-22T10:00:18Z", urgentError), event("f0", "2026-11-22T10:00:10Z", urgentError)]))
        let plan = Self.make([fire, recover, fireAgain])
        // Every transition of a group happens at its `now`: taken one request at a time, the two incidents would
        // share an id, and the second firing message would be the first one's duplicate.
        #expect(plan.transitions.map(\.change) == [.fire])
        #expect(plan.changes.alerts.map(\.state) == [.firing])
        let types = plan.changes.outbox.map { (try? JSONSerialization.jsonObject(with: Data($0.payload.utf8)) as? [String: Any])?["type"] as? String }
        #expect(types == ["alert.firing"])
        // Each request still gets its own receipt, and an id an earlier request of the group brought is a duplicate.
        #expect(
            plan.receipts == [
                IngestReceipt(accepted: 2, duplicates: 0), IngestReceipt(accepted: 1, duplicates: 0),
                IngestReceipt(accepted: 1, duplicates: 1),
            ]
        )
        #expect(plan.touched.count == 1)
        #expect(plan.touched.first?.record.monitor.hasSyncError == true)
    }

    @Test("requests of different devices in one group are each evaluated after their own events")
    func devicesAreIndependent() throws {
        let a = try Self.decoded(
            batch(device: "a", [event("n", #""kind": "network", "available": true"#), event("f", "2026-11-22T10:00:01Z", urgentError)])
        )
        let b = try Self.decoded(batch(device: "b", healthyEvents))
        let a2 = try Self.decoded(
            batch(device: "a", [event("s", "2026-11-22T10:00:02Z", #""kind": "activity", "phase": "export", "state": "succeeded""#)])
        )
        let plan = Self.make([a, b, a2])
        // a's error is followed by a success within the group: evaluated once, it never fired.
        #expect(plan.transitions.isEmpty)
        #expect(plan.touched.map(\.record.key.deviceId) == ["a", "b"])
        #expect(plan.receipts.map(\.accepted) == [2, 5, 1])
    }

    @Test("a device touched only to settle its flapping line keeps its timers")
    func settlingKeepsTimers() throws {
        var configuration = EngineConfiguration()
        configuration.forgetAfter = .seconds(86_400)
        let key = DeviceKey(appId: "com.example.notes", deviceId: "a")
        let broken = try Self.decoded(
            batch(device: "a", [event("n", #""kind": "network", "available": true"#), event("f", "2026-11-22T10:00:01Z", urgentError)])
        )
        var policy = NotificationPolicy()
        func plan(_ batches: [EventBatch], over cache: LocalCache, at now: Timestamp) -> GroupPlan {
            GroupPlan.make(
                batches: batches,
                seen: batches.map { _ in [] },
                due: [],
                devices: cache.devices,
                fleetAlerts: cache.fleetAlerts,
                policy: &policy,
                now: now,
                configuration: configuration,
                subscribers: { _, _ in [Self.hook] }
            )
        }
        var cache = LocalCache()
        cache.install(plan([broken], over: cache, at: testStart))
        // The device's line flaps (four fires within the window), and its last resolve is held.
        let line = AlertLine.device(key, .syncError)
        for i in 0..<4 {
            let at = testStart + .seconds(10 * i + 1)
            _ = policy.decide(key: line, transition: AlertTransition(kind: .syncError, change: .fire, startsAt: at), now: at)
            _ = policy.decide(
                key: line,
                transition: AlertTransition(kind: .syncError, change: .resolve, startsAt: at, endsAt: at + .seconds(5)),
                now: at + .seconds(5)
            )
        }
        // Quiet for the window: a group with no requests settles the line, touching the device for that alone.
        let settling = plan([], over: cache, at: testStart + .seconds(36 + 3_600))
        #expect(settling.changes.outbox.count == 1, "the settled resolve is told")
        #expect(settling.touched.map(\.record.key) == [key])
        let deadline = try #require(settling.changes.deadlines[key], "a settled device's timers are written with it, not dropped")
        #expect(deadline <= testStart + .seconds(86_400), "at the latest, when it is to be forgotten")
    }
}
