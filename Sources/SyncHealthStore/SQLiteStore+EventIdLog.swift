import Foundation
import GRDB

/// How the embedded store forgets expired event ids: a log, one row per commit (at most `EventIdLog.rowLimit`
/// ids each), of the ids that commit recorded, read oldest first.
///
/// An index on `seen_events.recorded_at` did the same by writing every id a second time, a B-tree entry per
/// event on the one writer; measured, that index cost batched ingestion 25-30% (BENCHMARKS.md, "The dedupe
/// table's expiry index"). A log row costs one append per commit.
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

    static func decode(_ bytes: [UInt8]) throws -> [(hash: Int64, id: String)] {
        var r = ByteReader(bytes)
        var ids: [(hash: Int64, id: String)] = []
        while !r.isAtEnd { ids.append((try r.i64(), try r.string())) }
        return ids
    }

    /// Appends the ids a commit recorded, at `recordedAt`, in rows of at most `rowLimit`.
    static func append(_ ids: [(hash: Int64, id: String)], recordedAt: Int64, _ db: Database) throws {
        if ids.isEmpty { return }
        let insert = try db.cachedStatement(sql: "INSERT INTO event_id_log (recorded_at, ids) VALUES (?, ?)")
        for start in stride(from: 0, to: ids.count, by: rowLimit) {
            try insert.execute(arguments: [recordedAt, Data(encode(ids[start..<min(start + rowLimit, ids.count)]))])
        }
    }

    /// Forgets up to `limit` logged ids recorded before `cutoff`, oldest commit first; a row is rewritten with what
    /// is left of it. An id is deleted only if it still carries the log row's time: one forgotten and recorded
    /// again since is left to its newer row. Returns how many logged ids were forgotten.
    static func prune(recordedBefore cutoff: Int64, limit: Int, _ db: Database) throws -> Int {
        let delete = try db.cachedStatement(sql: "DELETE FROM seen_events WHERE device_hash = ? AND event_id = ? AND recorded_at = ?")
        var forgotten = 0
        while forgotten < limit {
            // Oldest first by sequence; a clock that went back only delays rows behind the first unexpired one.
            guard let row = try Row.fetchOne(db, sql: "SELECT seq, recorded_at, ids FROM event_id_log ORDER BY seq LIMIT 1"),
                  let seq = row[0] as Int64?, let recordedAt = row[1] as Int64?, recordedAt < cutoff else { break }
            // A row that cannot be read is dropped (its ids are then never forgotten) rather than left
            // at the head of the log, where it would stop every later pass.
            let ids = (try? decode([UInt8](row[2] as Data? ?? Data()))) ?? []
            let take = min(ids.count, limit - forgotten)
            for e in ids.prefix(take) { try delete.execute(arguments: [e.hash, e.id, recordedAt]) }
            forgotten += take
            if take == ids.count {
                try db.execute(sql: "DELETE FROM event_id_log WHERE seq = ?", arguments: [seq])
            } else {
                try db.execute(sql: "UPDATE event_id_log SET ids = ? WHERE seq = ?", arguments: [Data(encode(ids[take...])), seq])
            }
        }
        return forgotten
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
