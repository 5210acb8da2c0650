import Foundation
import GRDB
import SyncHealthCore
import SyncHealthTestSupport
import Synchronization
import Testing

@testable import SyncHealthSQLite
@testable import SyncHealthStore

/// The embedded store's ceilings of event ids (`EventIdCeilings`): ids above their device's ceiling are judged new
/// without a read, and no recorded id is ever judged new.
@Suite("Event id ceilings")
struct EventIdCeilingTests {
    typealias Prefix = EventIdCeilings.Prefix

    static func judgedInMemory(_ store: SQLiteStore) -> Int { store.backlog.withLock { $0.ceilings.judgedInMemory } }

    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test("a prefix is the id's first 16 bytes, zero-padded, and keeps the ids' order")
    func prefixKeepsOrder() {
        #expect(Prefix(Self.bytes("a")) < Prefix(Self.bytes("b")))
        #expect(Prefix(Self.bytes("ab")) == Prefix(Self.bytes("ab") + [0]), "padding cannot tell them apart: both are read")
        #expect(Prefix(Self.bytes("0123456789abcdefXYZ")) == Prefix(Self.bytes("0123456789abcdef")))
        #expect(Prefix(Self.bytes("0123456789abcdeg")) > Prefix(Self.bytes("0123456789abcdefZZZ")))
        #expect(Prefix(Self.bytes("01234567z")) > Prefix(Self.bytes("01234567a")), "the second word counts")
        #expect(Prefix([]) == .zero)
        var rng = SplitMix64(seed: 29)
        // Short ids over a few byte values, so that prefixes, lengths and padding meet often.
        func id() -> [UInt8] {
            let values: [UInt8] = [0, 1, 0x61, 0xFF]
            return (0..<Int.random(in: 0...20, using: &rng)).map { _ in values[Int.random(in: 0..<values.count, using: &rng)] }
        }
        for _ in 0..<2_000 {
            let (a, b) = (id(), id())
            if a.lexicographicallyPrecedes(b) { #expect(Prefix(a) <= Prefix(b), "\(a) < \(b)") }
            if a == b { #expect(Prefix(a) == Prefix(b)) }
        }
    }

    @Test("a prefix's 16 bytes give the prefix back, and order as the prefixes do")
    func prefixBytes() {
        var rng = SplitMix64(seed: 31)
        let prefixes = (0..<500).map { _ in
            Prefix((0..<Int.random(in: 0...20, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
        }
        for (a, b) in zip(prefixes, prefixes.dropFirst()) {
            #expect(a.bytes.count == 16)
            #expect(Prefix(a.bytes) == a)
            #expect(a.bytes.lexicographicallyPrecedes(b.bytes) == (a < b))
        }
        #expect(Prefix.top.bytes == [UInt8](repeating: 0xFF, count: 16))
    }

    @Test("a device's ceiling in the tables is its highest id's prefix, raised and never lowered; zero without ids")
    func ceilingInTables() async throws {
        let store = try SQLiteStore(directory: temporaryDirectory(), synchronous: .normal)
        let key = DeviceKey(appId: "app", deviceId: "1")
        func ceilings() async throws -> [Prefix] {
            try await store.pool.read { db in
                try EventIds.recordedBefore([(hash: key.stableHash, ids: []), (hash: 42, ids: [])], db).ceilings
            }
        }
        #expect(try await ceilings() == [.zero, .zero])
        var changes = StoreChanges(recordedAt: seconds(1))
        changes.eventIds = [(key, "0005"), (key, "0009"), (key, "0002")]
        try await store.commit(changes)
        try await store.fold()
        #expect(try await ceilings() == [Prefix(Self.bytes("0009")), .zero])
        changes.eventIds = [(key, "0001")]
        try await store.commit(changes)
        try await store.fold()
        #expect(try await ceilings() == [Prefix(Self.bytes("0009")), .zero], "a lower id leaves it")
        try await store.close()
    }

    @Test("ids that grow are judged without a read once the device was read; an id at or below the ceiling is read")
    func growingIdsSkipTheRead() async throws {
        let store = try SQLiteStore(directory: temporaryDirectory(), synchronous: .normal)
        let key = DeviceKey(appId: "app", deviceId: "1")
        #expect(try await store.record(["0001"], of: key, at: seconds(1)) == [])
        #expect(Self.judgedInMemory(store) == 0, "the first claim of a device is read")
        #expect(try await store.record(["0002"], of: key, at: seconds(2)) == [])
        #expect(Self.judgedInMemory(store) == 1)
        #expect(try await store.record(["0002"], of: key, at: seconds(3)) == ["0002"], "equal to the ceiling: read")
        #expect(try await store.record(["0001"], of: key, at: seconds(4)) == ["0001"], "below it: read")
        #expect(try await store.record(["0000"], of: key, at: seconds(5)) == [], "below it and new")
        #expect(Self.judgedInMemory(store) == 1)
        try await store.fold()
        #expect(try await store.record(["0003", "0004"], of: key, at: seconds(6)) == [])
        #expect(try await store.record(["0005", "0004"], of: key, at: seconds(7)) == ["0004"], "one id not above: all read")
        #expect(Self.judgedInMemory(store) == 2)
        try await store.close()
    }

    @Test("a device's first ceiling covers its ids in the tables and in the backlog, and the group being judged")
    func firstCeilingCoversEverything() async throws {
        let dir = temporaryDirectory()
        var store = try SQLiteStore(directory: dir, synchronous: .normal)
        let inTables = DeviceKey(appId: "app", deviceId: "tables")
        _ = try await store.record(["0005", "0009"], of: inTables, at: seconds(1))
        try await store.close()

        store = try SQLiteStore(directory: dir, synchronous: .normal)
        #expect(try await store.record(["0007"], of: inTables, at: seconds(2)) == [])
        #expect(try await store.record(["0009"], of: inTables, at: seconds(3)) == ["0009"], "the highest id in the tables")

        // An id committed without a claim (`commit(_:)`) is in the backlog, and its device has no ceiling.
        let inBacklog = DeviceKey(appId: "app", deviceId: "backlog")
        var changes = StoreChanges(recordedAt: seconds(4))
        changes.eventIds = [(inBacklog, "0020")]
        try await store.commit(changes)
        #expect(try await store.record(["0015"], of: inBacklog, at: seconds(5)) == [])
        #expect(try await store.record(["0020"], of: inBacklog, at: seconds(6)) == ["0020"], "the backlog's highest id")

        let fresh = DeviceKey(appId: "app", deviceId: "fresh")
        #expect(try await store.record(["0030"], of: fresh, at: seconds(7)) == [])
        #expect(try await store.record(["0030"], of: fresh, at: seconds(8)) == ["0030"], "the first group's own id")
        try await store.close()
    }

    @Test("a device whose ceiling in the tables is the top is always read")
    func unboundedBucketsAreRead() async throws {
        let dir = temporaryDirectory()
        var store = try SQLiteStore(directory: dir, synchronous: .normal)
        let key = DeviceKey(appId: "app", deviceId: "1")
        _ = try await store.record(["0001"], of: key, at: seconds(1))
        try await store.close()
        let raw = try GRDBTestHelper.open(dir + "/synchealth.sqlite")
        try raw.execute("UPDATE event_id_ceilings SET through = x'\(String(repeating: "ff", count: 16))' WHERE device_hash = \(key.stableHash)")
        try raw.queue.close()

        store = try SQLiteStore(directory: dir, synchronous: .normal)
        for (i, id) in ["0002", "0003", "0004"].enumerated() {
            #expect(try await store.record([id], of: key, at: seconds(Int64(2 + i))) == [])
        }
        #expect(Self.judgedInMemory(store) == 0)
        try await store.close()
    }

    @Test(
        "claims of growing, repeated and lower ids, with folds running beside them and a restart, are judged as a set of every id would judge them",
        arguments: [1, 2, 3] as [UInt64]
    )
    func judgedAsTheModel(seed: UInt64) async throws {
        let dir = temporaryDirectory()
        var store = try SQLiteStore(directory: dir, synchronous: .normal)
        var rng = SplitMix64(seed: seed)
        let keys = (0..<4).map { DeviceKey(appId: "app", deviceId: "d\($0)") }
        var recorded: [DeviceKey: Set<String>] = [:]
        var next = 1_000
        for round in 0..<6 {
            let folding = Task { [store] in
                for _ in 0..<20 {
                    try await store.fold()
                    await Task.yield()
                }
            }
            for step in 0..<60 {
                let key = keys.randomElement(using: &rng) ?? keys[0]
                let ids = (0..<Int.random(in: 1...3, using: &rng)).map { _ -> String in
                    switch Int.random(in: 0..<10, using: &rng) {
                    case 0..<6:
                        next += 1
                        return String(format: "%08d", next)
                    case 6..<8: return recorded[key]?.randomElement(using: &rng) ?? "00000000"
                    default: return String(format: "%08d-low", Int.random(in: 0..<next, using: &rng))
                    }
                }
                let at = seconds(Int64(round * 100 + step))
                let seen = try await store.record(ids, of: key, at: at)
                #expect(seen == Set(ids).intersection(recorded[key] ?? []), "round \(round), step \(step), ids \(ids)")
                recorded[key, default: []].formUnion(ids)
            }
            try await folding.value
            if round == 3 {
                try await store.close()
                store = try SQLiteStore(directory: dir, synchronous: .normal)
            }
        }
        #expect(Self.judgedInMemory(store) > 0, "the growing ids were judged without a read")
        for key in keys {
            let ids = Array(recorded[key] ?? [])
            #expect(try await store.seenEventIds([(key: key, eventIds: ids)]) == [Set(ids)])
        }
        try await store.close()
    }
}
