import SyncHealthMonitorFixtures
import SyncHealthTestSupport
import Testing

@testable import SyncHealthCore

/// `ChunkedArray` and `ShardedDictionary`: the engine's cache grows through them, one device at a time.
@Suite("Collections that grow without moving")
struct GrowingCollectionTests {
    @Test("a chunked array keeps every element, in order, across chunk boundaries")
    func chunkedArrayAppends() {
        var array = ChunkedArray<Int>()
        #expect(array.isEmpty)
        let n = 3 * ChunkedArray<Int>.chunkSize + 5
        for i in 0..<n { array.append(i * 7) }
        #expect(array.count == n)
        #expect(Array(array) == (0..<n).map { $0 * 7 })
        #expect(array[ChunkedArray<Int>.chunkSize - 1] == (ChunkedArray<Int>.chunkSize - 1) * 7)
        #expect(array[ChunkedArray<Int>.chunkSize] == ChunkedArray<Int>.chunkSize * 7)
        #expect(array.last == (n - 1) * 7)
    }

    @Test("a chunked array's elements change in place, and only the one written")
    func chunkedArrayMutates() {
        var array = ChunkedArray<[String]>()
        for i in 0..<(ChunkedArray<[String]>.chunkSize + 2) { array.append(["\(i)"]) }
        let boundary = ChunkedArray<[String]>.chunkSize
        array[boundary].append("more")
        array[3] = ["replaced"]
        #expect(array[boundary] == ["\(boundary)", "more"])
        #expect(array[3] == ["replaced"])
        #expect(array[boundary - 1] == ["\(boundary - 1)"])
        #expect(array[boundary + 1] == ["\(boundary + 1)"])
        #expect(array.enumerated().filter { $0.element.count != 1 }.map(\.offset) == [boundary])
    }

    @Test("a chunked array is a value: a copy does not see later writes")
    func chunkedArrayIsAValue() {
        var array = ChunkedArray<Int>()
        array.append(1)
        let copy = array
        array[0] = 2
        array.append(3)
        #expect(Array(copy) == [1])
        #expect(Array(array) == [2, 3])
    }

    @Test("a sharded dictionary stores, overwrites and removes like a dictionary, and counts right")
    func shardedDictionaryMatchesADictionary() {
        var sharded = ShardedDictionary<String, Int>(shardCount: 16)
        var plain: [String: Int] = [:]
        var generator = SplitMix64(seed: 42)
        for step in 0..<20_000 {
            let key = "k\(generator.next() % 3_000)"
            switch generator.next() % 4 {
            case 0:
                sharded[key] = nil
                plain[key] = nil
            default:
                sharded[key] = step
                plain[key] = step
            }
            if step % 997 == 0 { #expect(sharded.count == plain.count) }
        }
        #expect(sharded.count == plain.count)
        #expect(sharded.isEmpty == plain.isEmpty)
        for i in 0..<3_000 { #expect(sharded["k\(i)"] == plain["k\(i)"]) }
        sharded.removeAll()
        #expect(sharded.count == 0)
        #expect(sharded["k1"] == nil)
    }

    @Test("a sharded dictionary spreads keys over its shards, and withShard keeps the count")
    func shardedDictionaryShards() {
        var sharded = ShardedDictionary<Int, Int>(shardCount: 10)
        sharded.reserveCapacity(1_000)
        for i in 0..<1_000 { sharded[i] = i }
        // 10 rounds up to 16 shards; a shard holds the keys that hash to it, so a key's shard sees it.
        var sizes: Set<Int> = []
        for i in 0..<1_000 {
            let size = sharded.withShard(of: i) { shard in
                #expect(shard[i] == i)
                return shard.count
            }
            sizes.insert(size)
        }
        #expect(sizes.allSatisfy { $0 < 1_000 / 4 })
        let neighbour = (1_000...).first { sharded.shard(of: $0) == sharded.shard(of: 5) } ?? 0
        sharded.withShard(of: 5) { shard in
            shard = shard.filter { $0.key != 5 }
            shard[neighbour] = 1
        }
        #expect(sharded.count == 1_000)
        #expect(sharded[5] == nil)
        #expect(sharded[neighbour] == 1)
    }

    @Test("a sharded dictionary yields every entry once, and equals another with the same entries in any order")
    func shardedDictionaryIteratesAndCompares() {
        var a = ShardedDictionary<String, Int>(shardCount: 8)
        var b = ShardedDictionary<String, Int>(shardCount: 8)
        var c = ShardedDictionary<String, Int>(shardCount: 32)
        for i in 0..<500 { a["k\(i)"] = i }
        for i in (0..<500).reversed() { b["k\(i)"] = i }
        for i in 0..<500 { c["k\(i)"] = i }
        #expect(a.count == 500)
        #expect(Dictionary(uniqueKeysWithValues: a.map { ($0.key, $0.value) }) == Dictionary(uniqueKeysWithValues: (0..<500).map { ("k\($0)", $0) }))
        #expect(a == b)
        #expect(a == c)
        b["k7"] = 8
        #expect(a != b)
        c["k7"] = nil
        #expect(a != c)
        c["k7"] = 7
        #expect(a == c)
    }
}
