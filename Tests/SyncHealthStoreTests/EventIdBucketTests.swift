import Foundation
import GRDB
import SyncHealthCore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthStore

/// The embedded store's buckets of event ids (`EventIdBuckets`), checked through the store and in its file.
@Suite("Event id buckets")
struct EventIdBucketTests {
    /// One stored bucket, read back from the file.
    struct StoredBucket {
        var device: Int64
        var lo: [UInt8]
        var oldest: Int64
        var ids: [[UInt8]]
        var times: [Int64]
        var size: Int
    }

    static func buckets(_ dir: String) throws -> [StoredBucket] {
        let queue = try DatabaseQueue(path: dir + "/synchealth.sqlite")
        defer { try? queue.close() }
        return try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT device_hash, lo, oldest, entries FROM event_id_buckets ORDER BY device_hash, lo").map { row in
                let bytes = [UInt8](row[3] as Data)
                let (ids, times) = try entries(bytes)
                return StoredBucket(device: row[0], lo: [UInt8](row[1] as Data? ?? Data()), oldest: row[2], ids: ids, times: times, size: bytes.count)
            }
        }
    }

    /// The ids and times of stored entries (a bucket's or a tail's), which must read back.
    static func entries(_ bytes: [UInt8]) throws -> (ids: [[UInt8]], times: [Int64]) {
        let starts = try #require(EventIdBuckets.offsets(bytes), "every row of entries reads back")
        var ids: [[UInt8]] = []
        var times: [Int64] = []
        for (i, start) in starts.enumerated() {
            let end = i + 1 < starts.count ? starts[i + 1] : bytes.count
            ids.append(Array(bytes[EventIdBuckets.idRange(bytes, entryAt: start)]))
            times.append(EventIdBuckets.time(bytes, entryEnd: end))
        }
        return (ids, times)
    }

    /// What must hold of every device's buckets: the first starts at the empty `lo` (unless expiry deleted it), each
    /// holds its range's ids in order, none is much past the size limit, none is empty, and `oldest` is its oldest
    /// entry's time.
    static func checkInvariants(_ buckets: [StoredBucket], afterExpiry: Bool = false) {
        let byDevice = Dictionary(grouping: buckets, by: \.device)
        for (_, list) in byDevice {
            if !afterExpiry { #expect(list.first?.lo == [], "a device's first bucket covers every id below the second's") }
            for (i, bucket) in list.enumerated() {
                #expect(!bucket.ids.isEmpty)
                #expect(bucket.size <= EventIdBuckets.maxBytes + 2 + 128 * 4 + 8, "a bucket passes the limit by less than one entry")
                #expect(bucket.oldest == bucket.times.min())
                #expect(zip(bucket.ids, bucket.ids.dropFirst()).allSatisfy { EventIdBuckets.less($0, $1) }, "entries in order")
                #expect(bucket.ids.allSatisfy { !EventIdBuckets.less($0, bucket.lo) }, "entries at or above lo")
                if i + 1 < list.count {
                    #expect(bucket.ids.allSatisfy { EventIdBuckets.less($0, list[i + 1].lo) }, "entries below the next lo")
                }
            }
        }
    }

    @Test("thousands of ids of one device, in random order and in runs, split into buckets that still find every one")
    func splitsAndFinds() async throws {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir, synchronous: .normal)
        let key = DeviceKey(appId: "app", deviceId: "chatty")
        let quiet = DeviceKey(appId: "app", deviceId: "quiet")
        var random = SplitMix64(seed: 6)
        var all: [String] = []
        for round in 0..<40 {
            // Half the batches are UUID-like (spread over every bucket), half a numbered run (appended at one end).
            let ids =
                round.isMultiple(of: 2)
                ? (0..<100).map { _ in String(random.next(), radix: 36) + "-é" }
                : (0..<100).map { "run-\(String(format: "%06d", round * 100 + $0))" }
            let seen = try await store.commit(
                claiming: [(key: key, eventIds: ids), (key: quiet, eventIds: ["q\(round)"])],
                at: seconds(Int64(round))
            ) { seen in (StoreChanges(recordedAt: seconds(Int64(round))), seen) }
            #expect(seen == [[], []])
            all += ids
            // Every other round goes into the buckets at once; the others wait in the journal's backlog, where
            // dedupe finds them too, and go in with the next.
            if round.isMultiple(of: 2) { try await store.fold() }
        }
        let again = Array(all.shuffled(using: &random).prefix(500)) + ["never", "run-999999", ""]
        let seen = try await store.seenEventIds([(key: key, eventIds: again), (key: quiet, eventIds: ["q3", "run-000100"])])
        #expect(seen == [Set(again.prefix(500)), ["q3"]])
        try await store.close()

        let buckets = try Self.buckets(dir)
        let tails = try EventIdTailTests.tails(dir)
        #expect(buckets.filter { $0.device == key.stableHash }.count > 20, "4,000 ids of ~20 bytes fill many buckets")
        #expect(buckets.filter { $0.device == quiet.stableHash }.isEmpty, "40 short ids stay in the tail")
        #expect(tails.first { $0.device == quiet.stableHash }?.ids.count == 40)
        let inBuckets: [String] = buckets.flatMap { b in b.ids.map { "\(b.device) \(String(decoding: $0, as: UTF8.self))" } }
        let inTails: [String] = tails.flatMap { t in t.ids.map { "\(t.device) \(String(decoding: $0, as: UTF8.self))" } }
        let stored = inBuckets + inTails
        #expect(stored.count == 4_040 && Set(stored).count == 4_040, "every id once, in a bucket or in the tail")
        Self.checkInvariants(buckets)
        EventIdTailTests.checkInvariants(tails, buckets)
    }

    @Test("expiry empties and deletes buckets oldest first, and ids in a deleted bucket's range are recorded again")
    func expiryDeletesBuckets() async throws {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir, synchronous: .normal)
        let key = DeviceKey(appId: "app", deviceId: "1")
        for round in 0..<10 {
            let ids = (0..<100).map { "e-\(String(format: "%05d", round * 100 + $0))" }
            _ = try await store.record(ids, of: key, at: seconds(Int64(round)))
            try await store.fold()
        }
        let before = try Self.buckets(dir).count
        #expect(try await store.pruneEventIds(recordedBefore: seconds(5), limit: 1_000) == 500)
        let after = try Self.buckets(dir)
        #expect(after.count < before)
        #expect(after.allSatisfy { $0.times.allSatisfy { $0 >= seconds(5).microseconds } })
        // The first buckets went: an old id is new again, and waits in the tail.
        #expect(try await store.record(["e-00000", "e-00999"], of: key, at: seconds(20)) == ["e-00999"])
        try await store.fold()
        Self.checkInvariants(try Self.buckets(dir), afterExpiry: true)
        #expect(try EventIdTailTests.tails(dir).flatMap(\.ids) == [Array("e-00000".utf8)])
        #expect(try await store.pruneEventIds(recordedBefore: seconds(30), limit: 10_000) == 501)
        #expect(try Self.buckets(dir).isEmpty)
        try await store.close()
    }

    @Test(
        "a bucket or tail that cannot be read is forgotten: its ids count as new, and expiry deletes or empties it",
        arguments: ["event_id_buckets", "event_id_tails"]
    )
    func unreadableRow(table: String) async throws {
        let dir = temporaryDirectory()
        var store = try SQLiteStore(directory: dir, synchronous: .normal)
        let key = DeviceKey(appId: "app", deviceId: "1")
        let other = DeviceKey(appId: "app", deviceId: "2")
        // "a" and 99 more, of 20-byte entries: past a tail's size, so they spill into a bucket.
        let ids = ["a"] + (1..<100).map { "id-\(String(format: "%06d", $0))" }
        _ = try await store.record(table == "event_id_tails" ? ["a"] : ids, of: key, at: seconds(10))
        _ = try await store.record(["b"], of: other, at: seconds(10))
        try await store.close()
        let raw = try GRDBTestHelper.open(dir + "/synchealth.sqlite")
        try raw.execute("UPDATE \(table) SET entries = x'0500616263' WHERE device_hash = \(key.stableHash)")
        try raw.queue.close()

        store = try SQLiteStore(directory: dir, synchronous: .normal)
        #expect(try await store.seenEventIds([(key: key, eventIds: ["a"]), (key: other, eventIds: ["b"])]) == [[], ["b"]])
        #expect(try await store.pruneEventIds(recordedBefore: seconds(20)) == 1, "the readable tail's id")
        #expect(try await store.record(["a"], of: key, at: seconds(30)) == [])
        #expect(try await store.record(["a"], of: key, at: seconds(31)) == ["a"])
        try await store.close()
        #expect(try Self.buckets(dir).allSatisfy { $0.device != key.stableHash || !$0.ids.isEmpty }, "no unreadable bucket left")
    }

    @Test("an upgrade moves ids from one row each into buckets, with their times")
    func migrationFromRows() async throws {
        let dir = temporaryDirectory()
        let key = DeviceKey(appId: "app", deviceId: "1")
        let other = DeviceKey(appId: "app", deviceId: "2")
        let ids = (0..<600).map { "id-\($0)" }
        try await oldStore(
            in: dir,
            upTo: "v3: event ids expire through a log per commit, not an index",
            eventIds: ids.enumerated().map { (key, $0.element, seconds(Int64($0.offset % 10))) } + [(other, "x", seconds(100))]
        )

        let store = try SQLiteStore(directory: dir, synchronous: .normal)
        #expect(try await store.seenEventIds([(key: key, eventIds: ids + ["id-600"]), (key: other, eventIds: ["x", "id-1"])]) == [Set(ids), ["x"]])
        #expect(try await store.pruneEventIds(recordedBefore: seconds(5)) == 300)
        #expect(try await store.seenEventIds([(key: key, eventIds: ids)]) == [Set(ids.enumerated().filter { $0.offset % 10 >= 5 }.map(\.element))])
        try await store.close()
        let buckets = try Self.buckets(dir)
        #expect(buckets.count > 2)
        Self.checkInvariants(buckets)
        let raw = try DatabaseQueue(path: dir + "/synchealth.sqlite")
        #expect(
            try await raw.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM sqlite_master WHERE name IN ('seen_events', 'event_id_log')") } == 0
        )
        try raw.close()
    }

    @Test("pieces are as even as can be and each passes the limit by less than one entry", arguments: [1, 2, 3, 7, 40])
    func piecesAreEven(fills: Int) {
        var writer = ByteWriter()
        var starts: [Int] = []
        var random = SplitMix64(seed: UInt64(fills))
        while writer.bytes.count < fills * EventIdBuckets.maxBytes - 600 {
            starts.append(writer.bytes.count)
            let length = Int(random.next() % 120) + 1
            EventIdBuckets.append(
                Array(repeating: UInt8(ascii: "a"), count: length) + [UInt8(starts.count % 256)],
                at: Int64(starts.count),
                to: &writer
            )
        }
        let pieces = EventIdBuckets.pieces(writer.bytes, starts: starts, firstLo: [])
        #expect(pieces.count == (writer.bytes.count + EventIdBuckets.maxBytes - 1) / EventIdBuckets.maxBytes)
        #expect(pieces.flatMap(\.bytes) == writer.bytes)
        let share = writer.bytes.count / pieces.count
        for piece in pieces {
            #expect(piece.bytes.count <= share + 2 + 121 + 8 + 1)
            #expect(piece.bytes.count >= share - 2 - 121 - 8 - 1)
        }
        #expect(pieces.first?.oldest == 1)
    }
}
