/// A dictionary split into a fixed number of smaller ones by the key's hash, so that growing never rehashes
/// more than one shard at a time.
///
/// A Swift `Dictionary` that passes three quarters of its capacity moves every entry into a table twice the size,
/// hashing each key again, in the insert that found it full; under the lock every ingest takes, that insert stalls
/// every request behind it, longer at each doubling. Each shard here is 1/`shardCount` of that size, so the longest
/// insert is too. Lookups hash the key twice (once for the shard, once in it).
///
/// Lookups and `withShard` are `@inlinable`, so that the modules that use it get them specialised for their keys
/// and values (docs/benchmarks-log.md#specialised-collections).
public struct ShardedDictionary<Key: Hashable, Value> {
    @usableFromInline var shards: [[Key: Value]]
    @usableFromInline var entries = 0
    /// The number of entries.
    @inlinable public var count: Int { entries }

    /// An empty dictionary of `shardCount` shards (rounded up to a power of two).
    public init(shardCount: Int = 256) {
        var n = 1
        while n < shardCount { n <<= 1 }
        shards = Array(repeating: [:], count: n)
    }

    /// Whether there are no entries.
    @inlinable public var isEmpty: Bool { count == 0 }

    /// The shard that holds `key`.
    @inlinable func shard(of key: Key) -> Int { key.hashValue & (shards.count - 1) }

    /// The value for `key`, or `nil`; setting `nil` removes the entry.
    @inlinable public subscript(key: Key) -> Value? {
        get { shards[shard(of: key)][key] }
        set { withShard(of: key) { $0[key] = newValue } }
    }

    /// Runs `body` on the shard that holds `key` (and every key that shares its shard), keeping `count` right
    /// whatever `body` removes there. `body` may add `key`, and no key of another shard.
    @inlinable public mutating func withShard<R>(of key: Key, _ body: (inout [Key: Value]) throws -> R) rethrows -> R {
        let s = shard(of: key)
        let before = shards[s].count
        defer { entries += shards[s].count - before }
        return try body(&shards[s])
    }

    /// Makes room for `capacity` entries in all, spread evenly, so that loading them rehashes nothing.
    public mutating func reserveCapacity(_ capacity: Int) {
        let each = (capacity + shards.count - 1) / shards.count
        for s in shards.indices { shards[s].reserveCapacity(each + each / 8) }
    }

    /// Removes every entry.
    public mutating func removeAll() {
        for s in shards.indices { shards[s].removeAll() }
        entries = 0
    }
}

extension ShardedDictionary: Sequence {
    /// Every entry, shard by shard; the order is unspecified, as a dictionary's.
    public func makeIterator() -> FlattenSequence<[[Key: Value]]>.Iterator {
        shards.joined().makeIterator()
    }

    /// The number of entries.
    public var underestimatedCount: Int { count }
}

extension ShardedDictionary: Equatable where Value: Equatable {
    /// Whether both hold the same entries.
    public static func == (a: Self, b: Self) -> Bool {
        guard a.count == b.count else { return false }
        if a.shards.count == b.shards.count { return a.shards == b.shards }
        return a.allSatisfy { b[$0.key] == $0.value }
    }
}

extension ShardedDictionary: Sendable where Key: Sendable, Value: Sendable {}
