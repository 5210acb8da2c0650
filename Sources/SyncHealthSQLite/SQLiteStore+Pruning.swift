import GRDB
public import SyncHealthCore
import SyncHealthStore

extension SQLiteStore {
    public func pruneEventIds(recordedBefore cutoff: Timestamp, limit: Int) async throws -> Int {
        try await fold()
        return try await pool.write { db in
            try EventIds.prune(recordedBefore: cutoff.microseconds, limit: limit, db)
        }
    }

    public func pruneHistory(before cutoff: Timestamp, limit: Int) async throws -> Int {
        try await fold()
        return try await pool.write { db in
            let at = cutoff.microseconds
            try db.execute(
                sql: """
                    DELETE FROM alerts WHERE seq IN
                        (SELECT seq FROM alerts WHERE state = 'resolved' AND ends_at < ? ORDER BY ends_at LIMIT ?)
                    """,
                arguments: [at, limit]
            )
            var removed = db.changesCount
            // The oldest attempts only: where none is old enough, this reads `limit` rows, not the whole log.
            try db.execute(
                sql: "DELETE FROM deliveries WHERE seq IN (SELECT seq FROM deliveries ORDER BY seq LIMIT ?) AND attempted_at < ?",
                arguments: [limit - removed, at]
            )
            removed += db.changesCount
            try db.execute(
                sql: "DELETE FROM incidents WHERE seq IN (SELECT seq FROM incidents WHERE state = 'resolved' AND resolved_at < ? LIMIT ?)",
                arguments: [at, limit - removed]
            )
            return removed + db.changesCount
        }
    }
}
