import Foundation
import GRDB
import SyncHealthCore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthStore

/// The embedded store's tails of event ids (`EventIdTails`), checked through the store and in its file.
@Suite("Event id tails")
struct EventIdTailTests {
    /// One stored tail, read back from the file.
    struct StoredTail {
        var device: Int64
        var oldest: Int64?
        /// `nil` when the column is NULL.
        var through: [UInt8]?
        var ids: [[UInt8]]
        var times: [Int64]
        var size: Int
    }

    static func tails(_ dir: String) throws -> [StoredTail] {
        let queue = try DatabaseQueue(path: dir + "/synchealth.sqlite")
        defer { try? queue.close() }
        return try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT device_hash, oldest, buckets_through, entries FROM event_id_tails ORDER BY device_hash").map { row in
                let bytes = [UInt8](row[3] as Data)
                let (ids, times) = try EventIdBucketTests.entries(bytes)
                let through = (row[2] as Data?).map { [UInt8]($0) }
                return StoredTail(device: row[0], oldest: row[1], through: through, ids: ids, times: times, size: bytes.count)
            }
        }
    }

    /// What must hold of every tail: within the size limit, in order, `oldest` its oldest entry's time (NULL when
    /// empty), and every id in its device's buckets at or below `buckets_through`; a device with buckets has a tail.
    static func checkInvariants(_ tails: [StoredTail], _ buckets: [EventIdBucketTests.StoredBucket]) {
        for tail in tails {
            #expect(tail.size <= EventIdTails.maxBytes)
            #expect(tail.oldest == tail.times.min())
            #expect(zip(tail.ids, tail.ids.dropFirst()).allSatisfy { EventIdBuckets.less($0, $1) }, "entries in order")
            let inBuckets = buckets.filter { $0.device == tail.device }.flatMap(\.ids)
            if let through = tail.through {
                #expect(inBuckets.allSatisfy { !EventIdBuckets.less(through, $0) }, "no id in the buckets above buckets_through")
            }
        }
        let withTails = Set(tails.map(\.device))
        #expect(buckets.allSatisfy { withTails.contains($0.device) }, "a device with buckets has a tail")
    }

    @Test("a device's ids stay in its tail until they pass its size, then spill whole into the buckets")
    func spills() async throws {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir, synchronous: .normal)
        let key = DeviceKey(appId: "app", deviceId: "1")
        // Entries of 2 + 20 + 8 bytes: 34 fill a tail (1,020 bytes), the 35th spills.
        let ids = (0..<35).map { "0199-\(String(format: "%015d", $0))" }
        for (i, id) in ids.prefix(34).enumerated() {
            #expect(try await store.record([id], of: key, at: seconds(Int64(i))) == [])
            try await store.fold()
        }
        var tail = try #require(try Self.tails(dir).first)
        #expect(tail.ids.count == 34 && tail.oldest == seconds(0).microseconds && tail.through == [])
        #expect(try EventIdBucketTests.buckets(dir).isEmpty)

        #expect(try await store.record([ids[34], ids[3]], of: key, at: seconds(40)) == [ids[3]])
        try await store.fold()
        tail = try #require(try Self.tails(dir).first)
        #expect(tail.ids.isEmpty && tail.oldest == nil)
        #expect(tail.through == Array(ids[34].utf8), "the highest id spilled")
        let buckets = try EventIdBucketTests.buckets(dir)
        #expect(buckets.flatMap(\.ids) == ids.map { Array($0.utf8) })
        #expect(buckets.flatMap(\.times) == (0..<34).map { seconds($0).microseconds } + [seconds(40).microseconds], "each id keeps its time")

        // After the spill, ids are found in the buckets, and new ones go to the tail again.
        #expect(try await store.seenEventIds([(key: key, eventIds: ids + ["0200-new"])]) == [Set(ids)])
        #expect(try await store.record(["0200-new", ids[0]], of: key, at: seconds(50)) == [ids[0]])
        try await store.fold()
        tail = try #require(try Self.tails(dir).first)
        #expect(tail.ids == [Array("0200-new".utf8)] && tail.oldest == seconds(50).microseconds)
        #expect(try await store.pruneEventIds(recordedBefore: seconds(45)) == 35)
        #expect(try await store.seenEventIds([(key: key, eventIds: ids + ["0200-new"])]) == [["0200-new"]])
        try await store.close()
        Self.checkInvariants(try Self.tails(dir), try EventIdBucketTests.buckets(dir))
    }

    @Test("dedupe reads the buckets only for ids at or below buckets_through, or for all ids when it is NULL")
    func bucketsThrough() async throws {
        let dir = temporaryDirectory()
        var store = try SQLiteStore(directory: dir, synchronous: .normal)
        let key = DeviceKey(appId: "app", deviceId: "1")
        _ = try await store.record(["m"], of: key, at: seconds(1))
        try await store.close()
        // A bucket that holds ids on both sides of the tail's bound (as no store writes one).
        let raw = try GRDBTestHelper.open(dir + "/synchealth.sqlite")
        let entries = "0100" + "63" + "0000000000000000" + "0100" + "7a" + "0000000000000000"  // "c" and "z"
        try raw.execute("INSERT INTO event_id_buckets (device_hash, lo, oldest, entries) VALUES (\(key.stableHash), x'', 0, x'\(entries)')")
        try raw.execute("UPDATE event_id_tails SET buckets_through = x'6d' WHERE device_hash = \(key.stableHash)")  // "m"
        try raw.queue.close()

        store = try SQLiteStore(directory: dir, synchronous: .normal)
        #expect(try await store.seenEventIds([(key: key, eventIds: ["c", "m", "z"])]) == [["c", "m"]], "z is above the bound")
        try await store.close()
        let again = try GRDBTestHelper.open(dir + "/synchealth.sqlite")
        try again.execute("UPDATE event_id_tails SET buckets_through = NULL WHERE device_hash = \(key.stableHash)")
        try again.queue.close()
        store = try SQLiteStore(directory: dir, synchronous: .normal)
        #expect(try await store.seenEventIds([(key: key, eventIds: ["c", "m", "z"])]) == [["c", "m", "z"]])
        try await store.close()
    }

    @Test("an upgrade gives every device with buckets an empty tail that knows its highest id in them")
    func migrationGivesTails() async throws {
        let dir = temporaryDirectory()
        let key = DeviceKey(appId: "app", deviceId: "1")
        let other = DeviceKey(appId: "app", deviceId: "2")
        let ids = (0..<300).map { "id-\(String(format: "%04d", $0))" }
        try await oldStore(
            in: dir,
            upTo: "v3: event ids expire through a log per commit, not an index",
            eventIds: ids.map { (key, $0, seconds(1)) } + [(other, "x", seconds(2))]
        )
        let old = try DatabaseQueue(path: dir + "/synchealth.sqlite")
        try SQLiteStore.migrator.migrate(old, upTo: "v8: fleet history")
        try old.close()
        #expect(try EventIdBucketTests.buckets(dir).filter { $0.device == key.stableHash }.count > 2, "300 ids in several buckets")

        let store = try SQLiteStore(directory: dir, synchronous: .normal)
        let tails = try Self.tails(dir)
        #expect(tails.map(\.device).sorted() == [key.stableHash, other.stableHash].sorted())
        #expect(tails.allSatisfy { $0.ids.isEmpty && $0.oldest == nil })
        #expect(tails.first { $0.device == key.stableHash }?.through == Array("id-0299".utf8))
        #expect(tails.first { $0.device == other.stableHash }?.through == Array("x".utf8))
        #expect(try await store.seenEventIds([(key: key, eventIds: ids + ["id-0300"]), (key: other, eventIds: ["x", "y"])]) == [Set(ids), ["x"]])
        #expect(try await store.record(["id-0300", "id-0001"], of: key, at: seconds(3)) == ["id-0001"])
        try await store.close()
        Self.checkInvariants(try Self.tails(dir), try EventIdBucketTests.buckets(dir))
    }

    @Test("the migration's highest id is the last entry's, and nil for bytes that are not entries")
    func lastId() {
        var writer = ByteWriter()
        EventIdBuckets.append(Array("a".utf8), at: 1, to: &writer)
        EventIdBuckets.append(Array("bc".utf8), at: 2, to: &writer)
        #expect(MigrationV9.lastId(writer.bytes) == Array("bc".utf8))
        #expect(MigrationV9.lastId([]) == nil)
        #expect(MigrationV9.lastId(Array(writer.bytes.dropLast())) == nil)
        #expect(MigrationV9.lastId([0x05, 0x00, 0x61]) == nil)
    }
}
