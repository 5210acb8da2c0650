import Foundation
import GRDB

/// How migration v3 let the embedded store forget expired event ids: a log, one row per commit (at most
/// `EventIdLog.rowLimit` ids each), of the ids that commit recorded, read oldest first.
///
/// An index on `seen_events.recorded_at` did the same by writing every id a second time, a B-tree entry per
/// event on the one writer; measured, that index cost batched ingestion 25-30% (docs/benchmarks-log.md, "The dedupe
/// table's expiry index"). Migration v4 replaced the table and the log with `EventIdBuckets`; what is left here
/// is what v3 runs when it upgrades an older store.
enum EventIdLog {
    /// Most ids in one log row, so that forgetting a part of a row rewrites little.
    static let rowLimit = 512

    /// A log row's blob: each id as its device hash and its text.
    static func encode(_ ids: ArraySlice<(hash: Int64, id: String)>) -> [UInt8] {
        var w = ByteWriter(capacity: ids.count * 64)
        for e in ids {
            w.i64(e.hash)
            w.string(e.id)
        }
        return w.bytes
    }

    /// Appends the ids a commit recorded, at `recordedAt`, in rows of at most `rowLimit`.
    static func append(_ ids: [(hash: Int64, id: String)], recordedAt: Int64, _ db: Database) throws {
        if ids.isEmpty { return }
        let insert = try db.cachedStatement(sql: "INSERT INTO event_id_log (recorded_at, ids) VALUES (?, ?)")
        for start in stride(from: 0, to: ids.count, by: rowLimit) {
            try insert.execute(arguments: [recordedAt, Data(encode(ids[start..<min(start + rowLimit, ids.count)]))])
        }
    }

    /// Builds the log from the ids an earlier version stored with only the `recorded_at` index, grouped by time.
    static func migrate(_ db: Database) throws {
        let cursor = try Row.fetchCursor(db, sql: "SELECT recorded_at, device_hash, event_id FROM seen_events ORDER BY recorded_at")
        var pending: [(hash: Int64, id: String)] = []
        var pendingAt: Int64?
        while let row = try cursor.next() {
            let at: Int64 = row[0]
            if at != pendingAt, let previous = pendingAt {
                try append(pending, recordedAt: previous, db)
                pending.removeAll(keepingCapacity: true)
            }
            pendingAt = at
            pending.append((row[1], row[2]))
        }
        if let previous = pendingAt { try append(pending, recordedAt: previous, db) }
    }
}
