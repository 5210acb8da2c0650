import Foundation
import GRDB
import SyncHealthStore

/// Migration v9's tails, frozen (see `MigrationV4` for why a copy): an empty tail for every device with buckets,
/// whose `buckets_through` is the highest id in them.
enum MigrationV9 {
    static func run(_ db: Database) throws {
        let insert = try db.makeStatement(sql: "INSERT INTO event_id_tails (device_hash, entries, oldest, buckets_through) VALUES (?, x'', NULL, ?)")
        // A device's last bucket (the highest `lo`) holds its highest id, last. With max(), SQLite takes the other
        // columns from the row that has the maximum.
        let rows = try Row.fetchCursor(db, sql: "SELECT device_hash, max(lo), entries FROM event_id_buckets GROUP BY device_hash")
        while let row = try rows.next() {
            let hash: Int64 = row[0]
            let entries = [UInt8](row[2] as Data? ?? Data())
            try insert.execute(arguments: [hash, lastId(entries).map { Data($0) }])
        }
    }

    /// The id of the last entry (a 2-byte little-endian length, the id, an 8-byte time), or `nil` when the bytes
    /// are not a list of entries: then the tail's NULL says any id may be in the buckets.
    static func lastId(_ bytes: [UInt8]) -> [UInt8]? {
        var last: Range<Int>?
        var i = 0
        while i < bytes.count {
            guard i + 2 <= bytes.count else { return nil }
            let length = Int(bytes[i]) | Int(bytes[i + 1]) << 8
            guard i + 2 + length + 8 <= bytes.count else { return nil }
            last = (i + 2)..<(i + 2 + length)
            i += 2 + length + 8
        }
        return last.map { Array(bytes[$0]) }
    }
}
