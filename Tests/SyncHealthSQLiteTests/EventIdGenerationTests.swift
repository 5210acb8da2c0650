import Foundation
import GRDB
import SyncHealthCore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthSQLite
@testable import SyncHealthStore

/// The embedded store's event ids by generation (`EventIds`), checked through the store and in its file.
@Suite("Event ids by generation")
struct EventIdGenerationTests {
    static func generations(_ dir: String) throws -> [EventIds.Generation] {
        let queue = try DatabaseQueue(path: dir + "/synchealth.sqlite")
        defer { try? queue.close() }
        return try queue.read { db in try EventIds.generations(db) }
    }

    static func count(_ dir: String, _ sql: String) throws -> Int {
        let queue = try DatabaseQueue(path: dir + "/synchealth.sqlite")
        defer { try? queue.close() }
        return try queue.read { db in try Int.fetchOne(db, sql: sql) ?? -1 }
    }

    @Test("ids go to the generation of their time; expiry forgets a generation once all of it is older than the cutoff")
    func generationsExpireWhole() async throws {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir, synchronous: .normal, eventIdGeneration: .seconds(10))
        let key = DeviceKey(appId: "app", deviceId: "1")
        _ = try await store.record(["a"], of: key, at: seconds(1))
        _ = try await store.record(["b"], of: key, at: seconds(5))
        _ = try await store.record(["c"], of: key, at: seconds(11))
        _ = try await store.record(["d"], of: key, at: seconds(25))
        try await store.fold()
        #expect(
            try Self.generations(dir) == [
                .init(gen: 1, endsAt: seconds(11).microseconds),
                .init(gen: 2, endsAt: seconds(21).microseconds),
                .init(gen: 3, endsAt: seconds(35).microseconds),
            ]
        )
        // "a" and "b" are older than 10 s, but "b"'s generation runs to 11 s: both stay until it has ended.
        #expect(try await store.pruneEventIds(recordedBefore: seconds(10)) == 0)
        #expect(try await store.seenEventIds([(key: key, eventIds: ["a", "b", "c", "d"])]) == [["a", "b", "c", "d"]])
        #expect(try await store.pruneEventIds(recordedBefore: seconds(11)) == 2)
        #expect(try await store.seenEventIds([(key: key, eventIds: ["a", "b", "c", "d"])]) == [["c", "d"]])
        #expect(try Self.generations(dir).map(\.gen) == [2, 3], "an emptied generation goes")
        #expect(try await store.pruneEventIds(recordedBefore: seconds(40)) == 2)
        #expect(try Self.generations(dir).isEmpty)
        // The next id opens a generation of its own, after the last one's number.
        _ = try await store.record(["e"], of: key, at: seconds(41))
        try await store.fold()
        #expect(try Self.generations(dir) == [.init(gen: 1, endsAt: seconds(51).microseconds)])
        #expect(try await store.record(["a", "e"], of: key, at: seconds(42)) == ["e"], "a forgotten id is new again")
        try await store.close()
    }

    @Test("a fold writes ids by whole statements and one by one, in key order, each generation its own, every id once")
    func foldWritesChunksAndRest() async throws {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir, synchronous: .normal, eventIdGeneration: .seconds(10))
        let a = DeviceKey(appId: "app", deviceId: "a")
        let b = DeviceKey(appId: "app", deviceId: "b")
        // More than two statements' worth in the first generation, out of order and from two devices; fewer than one
        // in the second.
        let first = (0..<(2 * EventIds.insertChunk + 7)).reversed().map { "id-\($0)" }
        #expect(try await store.record(first, of: a, at: seconds(1)).isEmpty)
        #expect(try await store.record(Array(first.prefix(5)), of: b, at: seconds(2)).isEmpty, "another device's ids are its own")
        let second = (0..<(EventIds.insertChunk - 3)).map { "late-\($0)" }
        #expect(try await store.record(second, of: a, at: seconds(12)).isEmpty)
        try await store.fold()
        #expect(try Self.count(dir, "SELECT count(*) FROM event_ids WHERE gen = 1") == first.count + 5)
        #expect(try Self.count(dir, "SELECT count(*) FROM event_ids WHERE gen = 2") == second.count)
        // Read back from the tables alone (the fold emptied the journal), every id is known, and only for its device.
        #expect(try await store.seenEventIds([(key: a, eventIds: first + second)]) == [Set(first + second)])
        #expect(try await store.seenEventIds([(key: b, eventIds: first)]) == [Set(first.prefix(5))])
        try await store.close()
    }

    @Test("an erased device's ids are deleted by the sweep, a step at a time; the ids it sends after, in the same fold, stay")
    func erasureSweep() async throws {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir, synchronous: .normal, eventIdGeneration: .seconds(10))
        let a = DeviceKey(appId: "app", deviceId: "a")
        let b = DeviceKey(appId: "app", deviceId: "b")
        _ = try await store.record(["a1", "a2"], of: a, at: seconds(1))
        _ = try await store.record(["b1"], of: b, at: seconds(1))
        _ = try await store.record(["a3"], of: a, at: seconds(2))
        var erase = StoreChanges(recordedAt: seconds(3))
        erase.removals = [DeviceRemoval(key: a, reason: .erased)]
        try await store.commit(erase)
        #expect(try await store.record(["a1", "a4"], of: a, at: seconds(4)) == [], "the journal forgets the erased ids at once")
        try await store.fold()
        // The erasure closed the generation that held the device's ids: its later ids are in a newer one.
        #expect(try Self.generations(dir) == [.init(gen: 1, endsAt: seconds(3).microseconds), .init(gen: 2, endsAt: seconds(14).microseconds)])
        #expect(try Self.count(dir, "SELECT count(*) FROM event_ids") == 6)
        #expect(try Self.count(dir, "SELECT count(*) FROM erased_event_ids") == 1)

        var steps = 0
        while try await store.sweepErasedEventIds(limit: 2) { steps += 1 }
        #expect(steps >= 2, "the sweep looks at a bounded number of ids a step")
        #expect(try Self.count(dir, "SELECT count(*) FROM event_ids WHERE gen = 1") == 1, "b1 stays; a1, a2, a3 go")
        #expect(try Self.count(dir, "SELECT count(*) FROM event_ids WHERE gen = 2") == 2, "a1 and a4, sent after, stay")
        #expect(try Self.count(dir, "SELECT count(*) FROM erased_event_ids") == 0)
        #expect(try await store.seenEventIds([(key: a, eventIds: ["a1", "a2", "a4"]), (key: b, eventIds: ["b1"])]) == [["a1", "a4"], ["b1"]])
        #expect(try await store.sweepErasedEventIds() == false)
        try await store.close()
    }

    @Test("an erasure not yet swept when the store closes is swept after it opens again")
    func erasureSweepResumesAfterRestart() async throws {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir, synchronous: .normal, eventIdGeneration: .seconds(10))
        let a = DeviceKey(appId: "app", deviceId: "a")
        _ = try await store.record(["a1", "a2"], of: a, at: seconds(1))
        var erase = StoreChanges(recordedAt: seconds(3))
        erase.removals = [DeviceRemoval(key: a, reason: .erased)]
        try await store.commit(erase)
        try await store.close()
        let reopened = try SQLiteStore(directory: dir, synchronous: .normal, eventIdGeneration: .seconds(10))
        #expect(try Self.count(dir, "SELECT count(*) FROM event_ids") == 2)
        while try await reopened.sweepErasedEventIds(limit: 1) {}
        #expect(try Self.count(dir, "SELECT count(*) FROM event_ids") == 0)
        try await reopened.close()
    }

    @Test("an id recorded with a time before its generation's (a clock set back) is kept with it, never forgotten early")
    func clockSetBack() async throws {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir, synchronous: .normal, eventIdGeneration: .seconds(10))
        let key = DeviceKey(appId: "app", deviceId: "1")
        _ = try await store.record(["late"], of: key, at: seconds(100))
        _ = try await store.record(["early"], of: key, at: seconds(50))
        #expect(try await store.pruneEventIds(recordedBefore: seconds(60)) == 0)
        #expect(try await store.seenEventIds([(key: key, eventIds: ["late", "early"])]) == [["late", "early"]])
        #expect(try await store.pruneEventIds(recordedBefore: seconds(110)) == 2)
        try await store.close()
    }

    @Test("expiry deletes whole pages that new ids reuse: after the first windows the file stops growing")
    func fileStaysBounded() async throws {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir, synchronous: .normal, commitPath: .tables, eventIdGeneration: .seconds(1))
        let keys = (0..<50).map { DeviceKey(appId: "app", deviceId: "d\($0)") }
        var pages: [Int] = []
        // A window of 4 generations; 16 windows. Each second records 2,000 time-first ids.
        for second in 0..<64 {
            for key in keys {
                let ids = (0..<40).map { "\(100_000 + second)-\(1_000 + $0)-\(key.deviceId)" }
                _ = try await store.record(ids, of: key, at: seconds(Int64(second)))
            }
            _ = try await store.pruneEventIds(recordedBefore: seconds(Int64(second - 4)), limit: 100_000)
            if second % 8 == 7 {
                pages.append(try await store.pool.read { db in try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0 })
            }
        }
        try await store.close()
        let live = try Self.count(dir, "SELECT COUNT(*) FROM event_ids")
        #expect(live == 5 * 2_000, "the window's generations, and the one that has not ended")
        // Without expiry the file would grow by 2,000 ids a second to 8 times its size after the first window.
        #expect(try #require(pages.last) <= pages[1] + pages[1] / 10, "\(pages)")
    }

    @Test("an upgrade moves the ids of tails and buckets to generations by their day, with each device's ceiling")
    func migrationToGenerations() async throws {
        let day: Int64 = 86_400
        let dir = temporaryDirectory()
        let key = DeviceKey(appId: "app", deviceId: "1")
        let other = DeviceKey(appId: "app", deviceId: "2")
        let unbounded = DeviceKey(appId: "app", deviceId: "3")
        let ids = (0..<300).map { "id-\(String(format: "%04d", $0))" }
        // 300 ids in several buckets (v4), then an empty tail for each device with buckets (v9).
        try await oldStore(
            in: dir,
            upTo: "v3: event ids expire through a log per commit, not an index",
            eventIds: ids.map { (key, $0, seconds(1)) } + [(other, "x", seconds(day + 2))]
        )
        let old = try DatabaseQueue(path: dir + "/synchealth.sqlite")
        try SQLiteStore.migrator.migrate(old, upTo: "v9: each device's newest event ids in a tail, in front of its buckets")
        // A tail holding ids (2-byte length, id, 8-byte time, little-endian), and one whose bound is NULL.
        func entry(_ id: String, _ at: Int64) -> [UInt8] {
            let bytes = Array(id.utf8)
            var out = [UInt8(bytes.count & 0xFF), UInt8(bytes.count >> 8)] + bytes
            withUnsafeBytes(of: (at * 1_000_000).littleEndian) { out.append(contentsOf: $0) }
            return out
        }
        let otherTail = Data(entry("y", day + 5) + entry("z", 2 * day + 1))
        let unboundedTail = Data(entry("u", 3))
        try await old.write { db in
            try db.execute(sql: "UPDATE event_id_tails SET entries = ? WHERE device_hash = ?", arguments: [otherTail, other.stableHash])
            try db.execute(
                sql: "INSERT INTO event_id_tails (device_hash, entries, oldest, buckets_through) VALUES (?, ?, ?, NULL)",
                arguments: [unbounded.stableHash, unboundedTail, 3_000_000]
            )
        }
        try old.close()

        let store = try SQLiteStore(directory: dir, synchronous: .normal)
        #expect(
            try Self.generations(dir) == (1...3).map { EventIds.Generation(gen: Int64($0), endsAt: seconds(Int64($0) * day).microseconds) }
        )
        #expect(try Self.count(dir, "SELECT COUNT(*) FROM event_ids") == 300 + 3 + 1)
        #expect(try Self.count(dir, "SELECT COUNT(*) FROM sqlite_master WHERE name IN ('event_id_tails', 'event_id_buckets')") == 0)
        let ceilings = try await store.pool.read { db in
            try EventIds.recordedBefore([key, other, unbounded].map { (key: $0, hash: $0.stableHash, ids: []) }, db).ceilings
        }
        #expect(ceilings == [EventIdCeilings.Prefix(Array("id-0299".utf8)), EventIdCeilings.Prefix(Array("z".utf8)), .top])
        #expect(
            try await store.seenEventIds([
                (key: key, eventIds: ids + ["id-0300"]), (key: other, eventIds: ["x", "y", "z", "w"]), (key: unbounded, eventIds: ["u"]),
            ])
                == [Set(ids), ["x", "y", "z"], ["u"]]
        )
        #expect(try await store.pruneEventIds(recordedBefore: seconds(day)) == 301, "the first day's ids")
        #expect(
            try await store.seenEventIds([(key: key, eventIds: ["id-0001"]), (key: other, eventIds: ["x", "y", "z"])]) == [[], ["x", "y", "z"]]
        )
        try await store.close()
    }
}
