import Foundation
import NIOCore
import NIOFoundationEssentialsCompat
import SyncHealthCore
import SyncHealthStore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthEngine

/// Devices that leave: forgotten after `forgetAfter`, or erased; planned, then installed in the local cache.
@Suite("Devices that leave: retention and erasure, without a server")
struct DeviceRemovalTests {
    static let forgetAfter = Duration.seconds(3_600)

    static var configuration: EngineConfiguration {
        var configuration = EngineConfiguration()
        configuration.forgetAfter = forgetAfter
        return configuration
    }

    /// A group at `now` over `table`, with the group's subscriber getting every alert.
    static func plan(
        _ batches: [EventBatch] = [],
        due: [Int] = [],
        erasures: [DeviceKey] = [],
        over cache: LocalCache,
        at now: Timestamp
    ) -> GroupPlan {
        var policy = NotificationPolicy()
        var plan = GroupPlan.make(
            batches: batches,
            seen: batches.map { _ in [] },
            due: due,
            erasures: erasures,
            devices: cache.devices,
            fleetAlerts: cache.fleetAlerts,
            policy: &policy,
            now: now,
            configuration: configuration,
            subscribers: { _, _ in [GroupPlanTests.hook] }
        )
        plan.evaluateFleet(
            before: { cache.counters[FleetScope(containerId: $0)] },
            now: now,
            configuration: configuration,
            subscribers: { _, _ in [GroupPlanTests.hook] }
        )
        return plan
    }

    /// A cache where device "a" has a firing syncError and device "b" is healthy, both seen at `testStart`.
    static func cacheWithBrokenDevice() throws -> LocalCache {
        let broken = try GroupPlanTests.decoded(
            batch(device: "a", [event("n", #""kind": "network", "available": true"#), event("f", "2026-11-22T10:00:01Z", urgentError)])
        )
        let healthy = try GroupPlanTests.decoded(batch(device: "b", healthyEvents))
        var cache = LocalCache()
        cache.install(plan([broken, healthy], over: cache, at: testStart))
        return cache
    }

    static func payloads(_ plan: GroupPlan) -> [[String: Any]] {
        plan.changes.outbox.compactMap { try? JSONSerialization.jsonObject(with: Data($0.payload.utf8)) as? [String: Any] }
    }

    @Test("a device's timers come due when it is to be forgotten, however quiet its alert rules are")
    func forgetTimeIsADeadline() throws {
        let cache = try Self.cacheWithBrokenDevice()
        let b = try #require(cache.devices.index[DeviceKey(appId: "com.example.notes", deviceId: "b")])
        #expect(cache.deadlineOf[b] <= (testStart + Self.forgetAfter).microseconds)
        #expect(cache.deadlineOf[b] > (testStart + .seconds(60)).microseconds, "the silence deadline is later than the rules'")
    }

    @Test("a device not seen for forgetAfter is forgotten: its firing alert resolves with reason forgotten, told; it leaves every count")
    func forgottenDevice() throws {
        var cache = try Self.cacheWithBrokenDevice()
        #expect(cache.counters[FleetScope()].devices == 2)
        let a = DeviceKey(appId: "com.example.notes", deviceId: "a")
        let now = testStart + Self.forgetAfter + .seconds(1)
        let due = cache.popDue(now: now, limit: 10)
        #expect(due.count == 2)
        let plan = Self.plan(due: due, over: cache, at: now)
        #expect(Set(plan.changes.removals.map(\.key.deviceId)) == ["a", "b"])
        #expect(plan.changes.removals.allSatisfy { $0.reason == .forgotten })
        #expect(plan.changes.devices.isEmpty)
        #expect(plan.changes.alerts.map(\.state) == [.resolved])
        #expect(plan.changes.alerts.first?.reason == .forgotten)
        #expect(plan.changes.alerts.first?.deviceId == a.deviceId)
        let told = Self.payloads(plan).compactMap { $0["data"] as? [String: Any] }
        #expect(told.map { $0["reason"] as? String } == ["forgotten"], "the resolve is told, with its reason")
        #expect(plan.counterDeltas[FleetScope()].devices == -2, "the group's change: both leave")

        cache.install(plan)
        #expect(cache.counters[FleetScope()].devices == 0)
        #expect(cache.releases.releases(appId: "com.example.notes", by: .appVersion).isEmpty)
        #expect(cache.devices.liveCount == 0)
        #expect(cache.devices.index[a] == nil)
        #expect(cache.firing[.syncError] == 0)
        #expect(cache.popDue(now: now + .seconds(86_400), limit: 10).isEmpty, "a forgotten device has no timers")
    }

    @Test("a device that posts before its forget time stays, and its forget time moves with its last event")
    func activeDeviceStays() throws {
        var cache = try Self.cacheWithBrokenDevice()
        let later = testStart + Self.forgetAfter - .seconds(10)
        let post = try GroupPlanTests.decoded(batch(device: "b", [event("late", #""kind": "network", "available": true"#)]))
        cache.install(Self.plan([post], over: cache, at: later))
        let now = testStart + Self.forgetAfter + .seconds(1)
        let plan = Self.plan(due: cache.popDue(now: now, limit: 10), over: cache, at: now)
        #expect(plan.changes.removals.map(\.key.deviceId) == ["a"])
        cache.install(plan)
        let b = try #require(cache.devices.index[DeviceKey(appId: "com.example.notes", deviceId: "b")])
        #expect(cache.deadlineOf[b] <= (later + Self.forgetAfter).microseconds)
    }

    @Test("an erased device leaves every count and nothing is told; an unknown one is reported as not stored")
    func erasedDevice() throws {
        var cache = try Self.cacheWithBrokenDevice()
        let a = DeviceKey(appId: "com.example.notes", deviceId: "a")
        let plan = Self.plan(erasures: [a, DeviceKey(appId: "com.example.notes", deviceId: "nobody")], over: cache, at: testStart + .seconds(5))
        #expect(plan.erased == [true, false])
        #expect(plan.changes.removals == [DeviceRemoval(key: a, reason: .erased)])
        #expect(plan.changes.alerts.isEmpty && plan.changes.outbox.isEmpty && plan.changes.devices.isEmpty)
        #expect(plan.counterDeltas[FleetScope()].devices == -1, "the group's change")
        cache.install(plan)
        #expect(cache.counters[FleetScope()].devices == 1)
        #expect(cache.counters[FleetScope()].broken == 0)
        #expect(cache.devices.liveCount == 1)
        #expect(cache.firing[.syncError] == 0, "its firing alert no longer counts")
    }

    @Test("a device erased in the group that created it is written as a removal, so that its ids go too")
    func erasedInItsFirstGroup() throws {
        let cache = LocalCache()
        let post = try GroupPlanTests.decoded(batch(device: "new", healthyEvents))
        let key = DeviceKey(appId: "com.example.notes", deviceId: "new")
        let plan = Self.plan([post], erasures: [key], over: cache, at: testStart)
        #expect(plan.erased == [true])
        #expect(plan.changes.devices.isEmpty)
        #expect(plan.changes.removals == [DeviceRemoval(key: key, reason: .erased)])
        #expect(plan.counterDeltas[FleetScope()].devices == 0)
    }
}

/// The local cache after devices leave: positions marked gone, compaction, and listings by ordinal.
@Suite("Cache compaction")
struct LocalCacheCompactionTests {
    @Test("compaction drops the gone positions, keeps every other device's index, timers and ordinal")
    func compactionKeepsTheRest() {
        var cache = LocalCacheDeadlineTests.cache(devices: 6_000)
        for i in 0..<6_000 { cache.setDeadline(LocalCacheDeadlineTests.at(Int64(i)), for: i) }
        for i in stride(from: 0, to: 6_000, by: 3) {
            cache.setDeadline(nil, for: i)
            cache.devices.remove(at: i)
        }
        let (live, positions, wants) = (cache.devices.liveCount, cache.devices.count, cache.devices.wantsCompaction)
        #expect(live == 4_000 && positions == 6_000 && wants)
        cache.compact()
        let (liveAfter, positionsAfter) = (cache.devices.liveCount, cache.devices.count)
        #expect(liveAfter == 4_000 && positionsAfter == 4_000)
        var wrong: [String] = []
        for position in 0..<cache.devices.count {
            let key = cache.devices.records[position].key
            let n = Int64(key.deviceId.dropFirst("dev-".count)) ?? -1
            if cache.devices.index[key] != position || n % 3 == 0 || cache.devices.ordinals[position] != n
                || cache.deadlineOf[position] != LocalCacheDeadlineTests.at(n).microseconds
            {
                wrong.append(key.deviceId)
            }
        }
        #expect(wrong.isEmpty, "each device keeps its index, its ordinal (its place in first-seen order) and its timer")
        let after3 = cache.devices.position(atOrAfter: 3)
        #expect(after3 == 2, "dev-3 went: the next device after ordinal 3 is dev-4")
        // Timers come due in time order, as before.
        let due = cache.popDue(now: LocalCacheDeadlineTests.at(5), limit: 100)
        #expect(due.map { cache.devices.records[$0].key.deviceId } == ["dev-1", "dev-2", "dev-4", "dev-5"])
        let late = DeviceRecord(key: DeviceKey(appId: "com.example", deviceId: "late"), firstSeenAt: testStart)
        let next = cache.append(late, contribution: late.fleetContribution(now: testStart, configuration: AlertConfiguration()))
        let ordinal = cache.devices.ordinals[next]
        #expect(ordinal == 6_000)
    }
}
