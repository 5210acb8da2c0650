import HeapModule
import SyncHealthCore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthEngine

/// The cache's timer heap: a device's deadline comes due once, at its latest value, whatever moved it meanwhile.
@Suite("Cache deadlines")
struct LocalCacheDeadlineTests {
    /// A cache with `count` devices.
    static func cache(devices count: Int) -> LocalCache {
        var cache = LocalCache()
        for i in 0..<count {
            let record = DeviceRecord(key: DeviceKey(appId: "com.example", deviceId: "dev-\(i)"), firstSeenAt: testStart)
            _ = cache.append(record, contribution: record.fleetContribution(now: testStart, configuration: AlertConfiguration()))
        }
        return cache
    }

    static func at(_ seconds: Int64) -> Timestamp { testStart + .seconds(seconds) }

    @Test("a deadline that moves later keeps one heap entry, and comes due once, at its last value")
    func laterDeadlineKeepsOneEntry() {
        var cache = Self.cache(devices: 2)
        for s in stride(from: Int64(10), through: 1_000, by: 10) { cache.setDeadline(Self.at(s), for: 1) }
        #expect(cache.deadlines.count == 1)
        #expect(cache.popDue(now: Self.at(15), limit: 10).isEmpty)
        #expect(cache.deadlines.count == 1, "the entry came up early and went back at the deadline")
        #expect(cache.deadlines.min?.at == Self.at(1_000))
        #expect(cache.popDue(now: Self.at(999), limit: 10).isEmpty)
        #expect(cache.popDue(now: Self.at(1_000), limit: 10) == [1])
        #expect(cache.popDue(now: Self.at(5_000), limit: 10).isEmpty)
        #expect(cache.deadlines.isEmpty)
    }

    @Test("a deadline moved earlier comes due at the earlier time, once")
    func earlierDeadlineComesDueOnce() {
        var cache = Self.cache(devices: 1)
        cache.setDeadline(Self.at(30), for: 0)
        cache.setDeadline(Self.at(10), for: 0)
        #expect(cache.popDue(now: Self.at(9), limit: 10).isEmpty)
        #expect(cache.popDue(now: Self.at(10), limit: 10) == [0])
        #expect(cache.popDue(now: Self.at(60), limit: 10).isEmpty, "the entry at 30 s is stale")
    }

    @Test("a deadline cleared, or cleared and set again, comes due only as last set")
    func clearedDeadline() {
        var cache = Self.cache(devices: 2)
        cache.setDeadline(Self.at(10), for: 0)
        cache.setDeadline(nil, for: 0)
        cache.setDeadline(Self.at(10), for: 1)
        cache.setDeadline(nil, for: 1)
        cache.setDeadline(Self.at(40), for: 1)
        #expect(cache.popDue(now: Self.at(20), limit: 10).isEmpty)
        #expect(cache.popDue(now: Self.at(40), limit: 10) == [1])
        #expect(cache.deadlines.isEmpty)
    }

    @Test("popping looks at `limit` entries at most, due or not, and the rest come up on the next call")
    func popLooksAtLimitEntries() {
        var cache = Self.cache(devices: 6)
        for i in 0..<3 {
            cache.setDeadline(Self.at(1), for: i)
            cache.setDeadline(Self.at(100), for: i)
        }
        for i in 3..<6 { cache.setDeadline(Self.at(2), for: i) }
        #expect(cache.popDue(now: Self.at(50), limit: 4) == [3])
        #expect(cache.popDue(now: Self.at(50), limit: 4) == [4, 5])
        #expect(cache.popDue(now: Self.at(100), limit: 4).sorted() == [0, 1, 2])
    }

    @Test("compaction drops the stale entries of deadlines moved earlier, and keeps every live one")
    func compactionKeepsLiveDeadlines() {
        var cache = Self.cache(devices: 3)
        for s in (100..<2_200).reversed() { cache.setDeadline(Self.at(Int64(s)), for: 0) }
        cache.setDeadline(Self.at(50), for: 2)
        #expect(cache.deadlines.count == 2_101)
        cache.compactDeadlinesIfNeeded()
        #expect(cache.deadlines.count == 2)
        #expect(cache.popDue(now: Self.at(10_000), limit: 10).sorted() == [0, 2])
        #expect(cache.deadlines.isEmpty)
    }
}
