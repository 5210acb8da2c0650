import SyncHealthEngine
import SyncHealthTestSupport
import Synchronization
import Testing

@testable import SyncHealthCore
@testable import SyncHealthServer

/// The per-device limiter keeps at most about `maxBuckets` buckets, in shards that are swept one at a time.
@Suite("Rate limiter capacity")
struct RateLimiterTests {
    static let t0 = Timestamp(microseconds: 1_000_000_000)
    /// 64 shards of 2 buckets; a token a second, bursts of 100.
    static func limiter() -> RateLimiter<String> { RateLimiter(limit: .init(perSecond: 1, burst: 100), maxBuckets: 128) }

    /// `count` keys other than `key` that share its shard, and one that does not.
    static func neighbours(of key: String, in limiter: RateLimiter<String>, count: Int) -> (same: [String], other: String) {
        let shard = limiter.buckets.withLock { $0.shard(of: key) }
        var same: [String] = []
        var other: String?
        var i = 0
        while same.count < count || other == nil {
            let candidate = "dev-\(i)"
            if limiter.buckets.withLock({ $0.shard(of: candidate) }) == shard {
                same.append(candidate)
            } else if other == nil {
                other = candidate
            }
            i += 1
        }
        return (Array(same.prefix(count)), other ?? "")
    }

    /// Takes tokens from `key` until one is refused; returns how many were allowed.
    static func drain(_ limiter: RateLimiter<String>, _ key: String, at now: Timestamp) -> Int {
        var allowed = 0
        while limiter.take(key, now: now).allowed { allowed += 1 }
        return allowed
    }

    /// A limiter whose shard of "hot" is full at `t0`: "hot" drained, and `same[0]` holding one token taken; `other`
    /// drained in another shard. `same[1]` shares the shard and is not there yet.
    static func fullShard() -> (limiter: RateLimiter<String>, same: [String], other: String) {
        let limiter = Self.limiter()
        let (same, other) = Self.neighbours(of: "hot", in: limiter, count: 2)
        #expect(Self.drain(limiter, "hot", at: Self.t0) == 100)
        #expect(Self.drain(limiter, other, at: Self.t0) == 100)
        #expect(limiter.take(same[0], now: Self.t0).allowed)
        return (limiter, same, other)
    }

    /// The keys in the shard of "hot".
    static func hotShard(_ limiter: RateLimiter<String>) -> Set<String> {
        limiter.buckets.withLock { $0.withShard(of: "hot") { Set($0.keys) } }
    }

    @Test("a full shard forgets the buckets that refilled and keeps the ones still in use, and no other shard's")
    func fullShardForgetsRefilledBuckets() {
        let (limiter, same, other) = Self.fullShard()
        // Two seconds on, same[0] is full again and "hot" has 2 tokens: the shard is full, so a new key sweeps it.
        let later = Self.t0 + .seconds(2)
        #expect(limiter.take(same[1], now: later).allowed)
        #expect(Self.hotShard(limiter) == ["hot", same[1]])
        #expect(Self.drain(limiter, "hot", at: later) == 2)
        #expect(Self.drain(limiter, other, at: later) == 2)
    }

    @Test("a shard full of buckets in use is forgotten whole when a new key arrives, and only that shard")
    func shardInUseIsForgottenWhole() {
        let (limiter, same, other) = Self.fullShard()
        #expect(limiter.take(same[1], now: Self.t0).allowed)
        #expect(Self.hotShard(limiter) == [same[1]])
        #expect(limiter.take("hot", now: Self.t0).allowed)
        #expect(!limiter.take(other, now: Self.t0).allowed)
    }

    @Test("a key the limiter holds takes its tokens without sweeping its full shard")
    func knownKeyDoesNotSweep() {
        let limiter = Self.limiter()
        let (same, _) = Self.neighbours(of: "hot", in: limiter, count: 1)
        #expect(limiter.take(same[0], now: Self.t0).allowed)
        #expect(limiter.take("hot", now: Self.t0).allowed)
        let later = Self.t0 + .seconds(2)
        #expect(limiter.take("hot", now: later).allowed)
        #expect(limiter.buckets.withLock { $0.count } == 2)
    }
}
