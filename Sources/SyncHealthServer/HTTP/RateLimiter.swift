public import SyncHealthCore
import Synchronization

/// Sustained rate and burst of one token bucket.
public struct RateLimit: Sendable, Equatable {
    /// Tokens added per second.
    public var perSecond: Double
    /// Bucket size.
    public var burst: Double

    /// Creates a limit.
    public init(perSecond: Double, burst: Double) {
        self.perSecond = perSecond
        self.burst = burst
    }
}

/// Token buckets keyed by what is limited (a device, an API key), on the service's clock.
public final class RateLimiter<Key: Hashable & Sendable>: Sendable {
    public typealias Limit = RateLimit

    /// The outcome of one request.
    public struct Decision: Sendable, Equatable {
        /// Whether the request may go on.
        public var allowed: Bool
        /// Whole tokens left.
        public var remaining: Int
        /// Seconds until a token is available (for `Retry-After`), when refused.
        public var retryAfterSeconds: Int
    }

    struct Bucket {
        var tokens: Double
        var updated: Timestamp
    }

    /// The limit, or `nil` when limiting is off.
    public let limit: Limit?
    /// Buckets in shards of `perShard` at most: a full shard is swept alone, and growing
    /// rehashes one shard, so no request waits for a sweep or a rehash of every key.
    let buckets: Mutex<ShardedDictionary<Key, Bucket>>
    /// The most buckets one shard keeps: `maxBuckets / shardCount`.
    let perShard: Int
    static var shardCount: Int { 64 }

    /// Creates a limiter that keeps about `maxBuckets` buckets at most; `nil` turns it off.
    public init(limit: Limit?, maxBuckets: Int = 200_000) {
        self.limit = limit
        perShard = max(1, maxBuckets / Self.shardCount)
        buckets = Mutex(ShardedDictionary(shardCount: Self.shardCount))
    }

    /// Takes one token from `key`'s bucket at `now`.
    public func take(_ key: Key, now: Timestamp) -> Decision {
        guard let limit, limit.perSecond > 0 else { return Decision(allowed: true, remaining: .max, retryAfterSeconds: 0) }
        return buckets.withLock { buckets in
            buckets.withShard(of: key) { shard in
                if shard.count >= perShard, shard[key] == nil {
                    // Full buckets carry no state worth keeping: forget them first, then everything if needed.
                    shard = shard.filter { Self.refill($0.value, limit: limit, now: now).tokens < limit.burst }
                    if shard.count >= perShard { shard.removeAll(keepingCapacity: true) }
                }
                var bucket = Self.refill(shard[key] ?? Bucket(tokens: limit.burst, updated: now), limit: limit, now: now)
                defer { shard[key] = bucket }
                if bucket.tokens >= 1 {
                    bucket.tokens -= 1
                    return Decision(allowed: true, remaining: Int(bucket.tokens), retryAfterSeconds: 0)
                }
                let wait = (1 - bucket.tokens) / limit.perSecond
                return Decision(allowed: false, remaining: 0, retryAfterSeconds: max(1, Int(wait.rounded(.up))))
            }
        }
    }

    static func refill(_ bucket: Bucket, limit: Limit, now: Timestamp) -> Bucket {
        let elapsed = max(0, (now - bucket.updated).secondsValue)
        return Bucket(tokens: min(limit.burst, bucket.tokens + elapsed * limit.perSecond), updated: max(now, bucket.updated))
    }
}
