import Foundation
import GRDB
import SyncHealthCore
import SyncHealthTestSupport
import Synchronization
import Testing

@testable import SyncHealthSQLite
@_spi(Testing) @testable import SyncHealthStore

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
        let none = DeviceKey(appId: "app", deviceId: "none")
        func ceilings() async throws -> [Prefix] {
            try await store.pool.read { db in
                try EventIds.recordedBefore([(key: key, hash: key.stableHash, ids: []), (key: none, hash: none.stableHash, ids: [])], db).ceilings
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

    /// The ceiling in `key`'s row, and the hashes with a ceiling apart from their rows.
    static func storedCeilings(_ dir: String, _ key: DeviceKey) throws -> (inRow: [UInt8]?, apart: [Int64]) {
        let raw = try GRDBTestHelper.open(dir + "/synchealth.sqlite")
        defer { try? raw.queue.close() }
        return try raw.queue.read { db in
            let inRow = try Data.fetchOne(
                db,
                sql: "SELECT id_ceiling FROM devices WHERE app_id = ? AND device_id = ?",
                arguments: [key.appId, key.deviceId]
            )
            return (inRow.map { [UInt8]($0) }, try Int64.fetchAll(db, sql: "SELECT device_hash FROM event_id_ceilings ORDER BY device_hash"))
        }
    }

    /// Commits `ids` of `key` with its record, as the engine does, or its removal.
    static func commit(_ store: SQLiteStore, _ key: DeviceKey, ids: [String] = [], removal: DeviceRemoval.Reason? = nil, at: Timestamp) async throws {
        var changes = StoreChanges(recordedAt: at)
        changes.eventIds = ids.map { (key, $0) }
        if let removal {
            changes.removals = [DeviceRemoval(key: key, reason: removal)]
        } else {
            changes.devices = [DeviceRecord(key: key, info: DeviceInfo(), firstSeenAt: t0)]
        }
        try await store.commit(changes)
    }

    @Test("a device's ceiling rides on its row, raised and never lowered; ids recorded without a row keep theirs apart")
    func ceilingInTheDeviceRow() async throws {
        let dir = temporaryDirectory()
        var store = try SQLiteStore(directory: dir, synchronous: .normal)
        let device = DeviceKey(appId: "app", deviceId: "row")
        let bare = DeviceKey(appId: "app", deviceId: "bare")
        try await Self.commit(store, device, ids: ["0005", "0009"], at: seconds(1))
        _ = try await store.record(["0007"], of: bare, at: seconds(2))
        try await store.fold()
        try await Self.commit(store, device, ids: ["0001"], at: seconds(3))
        try await Self.commit(store, device, at: seconds(4))
        try await store.fold()
        try await store.close()

        let stored = try Self.storedCeilings(dir, device)
        #expect(stored.inRow == Prefix(Self.bytes("0009")).bytes, "a lower id, and a record without ids, leave it")
        #expect(stored.apart == [bare.stableHash], "only the device without a row has a ceiling apart")
        store = try SQLiteStore(directory: dir, synchronous: .normal)
        #expect(try await store.record(["0009", "0010"], of: device, at: seconds(5)) == ["0009"])
        #expect(try await store.record(["0007", "0008"], of: bare, at: seconds(6)) == ["0007"])
        try await store.close()
    }

    @Test(
        "a device that leaves and comes back within one fold has a ceiling of its ids since it came back",
        arguments: [DeviceRemoval.Reason.forgotten, .erased]
    )
    func comingBackStartsAgain(reason: DeviceRemoval.Reason) async throws {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir, synchronous: .normal)
        let key = DeviceKey(appId: "app", deviceId: "1")
        try await Self.commit(store, key, ids: ["0009"], at: seconds(1))
        try await Self.commit(store, key, removal: reason, at: seconds(2))
        try await Self.commit(store, key, ids: ["0003"], at: seconds(3))
        try await store.fold()
        try await store.close()
        let stored = try Self.storedCeilings(dir, key)
        #expect(stored.inRow == Prefix(Self.bytes("0003")).bytes)
        #expect(stored.apart == [])
    }

    @Test("an upgrade moves each stored device's ceiling into its row, and keeps the ceilings of keys without a row")
    func migrationMovesCeilingsIntoRows() async throws {
        let dir = temporaryDirectory()
        let stored = DeviceKey(appId: "app", deviceId: "stored")
        let idle = DeviceKey(appId: "app", deviceId: "idle")
        let bare = DeviceKey(appId: "app", deviceId: "bare")
        let old = try DatabaseQueue(path: dir + "/synchealth.sqlite")
        try SQLiteStore.migrator.migrate(old, upTo: "v14: flapping incidents, and each incident's count over time")
        try await old.write { db in
            for key in [stored, idle] {
                try db.execute(
                    sql: "INSERT INTO devices (app_id, device_id, state) VALUES (?, ?, ?)",
                    arguments: [key.appId, key.deviceId, Data(DeviceRecord(key: key, info: DeviceInfo(), firstSeenAt: t0).binaryEncoded())]
                )
            }
            try db.execute(sql: "INSERT INTO event_id_generations (gen, ends_at) VALUES (1, ?)", arguments: [seconds(86_400).microseconds])
            for (key, id) in [(stored, "0004"), (stored, "0008"), (bare, "0006")] {
                try db.execute(
                    sql: "INSERT INTO event_ids (gen, id, device_hash) VALUES (1, ?, ?)",
                    arguments: [Data(Self.bytes(id)), key.stableHash]
                )
            }
            for (key, id) in [(stored, "0008"), (bare, "0006")] {
                try db.execute(
                    sql: "INSERT INTO event_id_ceilings (device_hash, through) VALUES (?, ?)",
                    arguments: [key.stableHash, Data(Prefix(Self.bytes(id)).bytes)]
                )
            }
        }
        try old.close()

        let store = try SQLiteStore(directory: dir, synchronous: .normal)
        #expect(try Self.storedCeilings(dir, stored).inRow == Prefix(Self.bytes("0008")).bytes)
        #expect(try Self.storedCeilings(dir, idle).inRow == nil, "a device without ids has none")
        #expect(try Self.storedCeilings(dir, idle).apart == [bare.stableHash], "moved out of the table, but the bare key's")
        let ceilings = try await store.pool.read { db in
            try EventIds.recordedBefore([stored, idle, bare].map { (key: $0, hash: $0.stableHash, ids: []) }, db).ceilings
        }
        #expect(ceilings == [Prefix(Self.bytes("0008")), .zero, Prefix(Self.bytes("0006"))])
        #expect(
            try await store.seenEventIds([(key: stored, eventIds: ["0004", "0008", "0009"]), (key: bare, eventIds: ["0006", "0007"])])
                == [["0004", "0008"], ["0006"]]
        )
        try await store.close()
    }

    @Test("the upgrade's frozen hash is the stable hash ids are keyed by")
    func frozenHashMatches() {
        for (app, device) in [("app", "1"), ("com.example.notes", "6F1C2A0E-5D3B-4F7A-9C21-0B8E4D6A9F13"), ("", ""), ("é", "設備")] {
            #expect(MigrationV15.stableHash(appId: app, deviceId: device) == DeviceKey(appId: app, deviceId: device).stableHash)
        }
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

    @Test("a restarted store loads every device's ceiling with its state, and judges the next claims as the process before it did")
    func loadedCeilingsSkipTheFirstRead() async throws {
        let dir = temporaryDirectory()
        var store = try SQLiteStore(directory: dir, synchronous: .normal)
        let device = DeviceKey(appId: "app", deviceId: "row")
        let quiet = DeviceKey(appId: "app", deviceId: "quiet")
        let bare = DeviceKey(appId: "app", deviceId: "bare")
        try await Self.commit(store, device, ids: ["0005", "0009"], at: seconds(1))
        try await Self.commit(store, quiet, at: seconds(2))
        _ = try await store.record(["0007"], of: bare, at: seconds(3))
        try await store.close()

        store = try SQLiteStore(directory: dir, synchronous: .normal)
        #expect(try await store.loadState().devices.map(\.key) == [device, quiet])
        #expect(try await store.record(["0010"], of: device, at: seconds(4)) == [])
        #expect(try await store.record(["0001"], of: quiet, at: seconds(5)) == [], "no ids: every id is above")
        #expect(try await store.record(["0008"], of: bare, at: seconds(6)) == [], "a ceiling apart from rows")
        #expect(Self.judgedInMemory(store) == 3, "no first read")
        #expect(try await store.record(["0009"], of: device, at: seconds(7)) == ["0009"], "at the ceiling: read, and found")
        #expect(try await store.record(["0007"], of: bare, at: seconds(8)) == ["0007"])
        #expect(Self.judgedInMemory(store) == 3)
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
        arguments: zip([1, 2, 3, 4] as [UInt64], [false, false, true, true])
    )
    func judgedAsTheModel(seed: UInt64, withRows: Bool) async throws {
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
                // With rows, as the engine commits: the ceiling goes in the device's row.
                let seen =
                    withRows
                    ? try await store.commit(claiming: [(key: key, eventIds: ids)], at: at) { seen in
                        var changes = StoreChanges(recordedAt: at)
                        changes.devices = [DeviceRecord(key: key, info: DeviceInfo(), firstSeenAt: t0)]
                        return (changes, seen[0])
                    }
                    : try await store.record(ids, of: key, at: at)
                #expect(seen == Set(ids).intersection(recorded[key] ?? []), "round \(round), step \(step), ids \(ids)")
                recorded[key, default: []].formUnion(ids)
            }
            try await folding.value
            if round == 3 {
                try await store.close()
                store = try SQLiteStore(directory: dir, synchronous: .normal)
                // As the engine starts: the ceilings come with the devices.
                if withRows { _ = try await store.loadState() }
            }
        }
        #expect(Self.judgedInMemory(store) > 0, "the growing ids were judged without a read")
        let apart = try await store.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM event_id_ceilings") ?? -1 }
        #expect(apart == (withRows ? 0 : keys.count), "ceilings in rows, or apart without them")
        for key in keys {
            let ids = Array(recorded[key] ?? [])
            #expect(try await store.seenEventIds([(key: key, eventIds: ids)]) == [Set(ids)])
        }
        try await store.close()
    }
}
