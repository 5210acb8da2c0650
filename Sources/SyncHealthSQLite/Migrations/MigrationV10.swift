import Foundation
import GRDB
import SyncHealthStore

/// Migration v10's move of the ids in tails and buckets into generations, frozen (see `MigrationV4` for why a
/// copy): each id goes to the generation of the UTC day it was recorded in, and each device's ceiling is the
/// first 16 bytes of its highest id (all ones for a tail whose `buckets_through` was NULL: any id may have been
/// in its buckets).
enum MigrationV10 {
    /// The span of the generations the migration makes: a day, in microseconds.
    static let day: Int64 = 86_400_000_000

    static func run(_ db: Database) throws {
        try db.execute(sql: "CREATE TEMP TABLE migrating_event_ids (day INTEGER NOT NULL, id BLOB NOT NULL, device_hash INTEGER NOT NULL)")
        let stage = try db.makeStatement(sql: "INSERT INTO migrating_event_ids (day, id, device_hash) VALUES (?, ?, ?)")
        var ceilings: [Int64: [UInt8]] = [:]
        func raise(_ hash: Int64, to prefix: [UInt8]) {
            if let ceiling = ceilings[hash], !ceiling.lexicographicallyPrecedes(prefix) { return }
            ceilings[hash] = prefix
        }
        func move(_ hash: Int64, _ entries: [UInt8]) throws {
            for (id, at) in decode(entries) {
                // Floor division: a time before 1970 stays in the day it is in.
                let day = at >= 0 ? at / Self.day : (at - Self.day + 1) / Self.day
                try stage.execute(arguments: [day, Data(id), hash])
                raise(hash, to: prefix(id))
            }
        }
        let tails = try Row.fetchCursor(db, sql: "SELECT device_hash, entries, buckets_through FROM event_id_tails")
        while let row = try tails.next() {
            let hash: Int64 = row[0]
            try move(hash, [UInt8](row[1] as Data? ?? Data()))
            if let through = row[2] as Data? {
                raise(hash, to: prefix([UInt8](through)))
            } else {
                raise(hash, to: [UInt8](repeating: 0xFF, count: 16))
            }
        }
        let buckets = try Row.fetchCursor(db, sql: "SELECT device_hash, entries FROM event_id_buckets")
        while let row = try buckets.next() { try move(row[0], [UInt8](row[1] as Data? ?? Data())) }
        try db.execute(
            sql: """
                INSERT INTO event_id_generations (ends_at)
                SELECT (day + 1) * ? FROM (SELECT DISTINCT day FROM migrating_event_ids) ORDER BY day;
                INSERT OR IGNORE INTO event_ids (gen, id, device_hash)
                SELECT g.gen, m.id, m.device_hash FROM migrating_event_ids m
                JOIN event_id_generations g ON g.ends_at = (m.day + 1) * ?
                ORDER BY g.gen, m.id, m.device_hash;
                DROP TABLE migrating_event_ids;
                """,
            arguments: [Self.day, Self.day]
        )
        let insert = try db.makeStatement(sql: "INSERT INTO event_id_ceilings (device_hash, through) VALUES (?, ?)")
        for (hash, through) in ceilings.sorted(by: { $0.key < $1.key }) { try insert.execute(arguments: [hash, Data(through)]) }
    }

    /// An id's first 16 bytes, zero-padded.
    static func prefix(_ id: [UInt8]) -> [UInt8] {
        Array(id.prefix(16)) + [UInt8](repeating: 0, count: max(0, 16 - id.count))
    }

    /// The entries of a tail or bucket (each a 2-byte little-endian length, the id, an 8-byte little-endian
    /// time); bytes that are not a list of entries give the entries before them.
    static func decode(_ bytes: [UInt8]) -> [(id: [UInt8], at: Int64)] {
        var entries: [(id: [UInt8], at: Int64)] = []
        var i = 0
        while i + 2 <= bytes.count {
            let length = Int(bytes[i]) | Int(bytes[i + 1]) << 8
            guard i + 2 + length + 8 <= bytes.count else { break }
            var time: UInt64 = 0
            for k in 0..<8 { time |= UInt64(bytes[i + 2 + length + k]) << (8 * UInt64(k)) }
            entries.append((Array(bytes[(i + 2)..<(i + 2 + length)]), Int64(bitPattern: time)))
            i += 2 + length + 8
        }
        return entries
    }
}
