import GRDB
public import SyncHealthCore
public import SyncHealthStore

extension SQLiteStore {
    public func recordHistory(_ points: [HistoryPoint], resolution: HistoryResolution) async throws {
        guard !points.isEmpty else { return }
        try await pool.write { db in
            let statement = try db.cachedStatement(
                sql: "INSERT OR IGNORE INTO fleet_history (resolution, at, app_id, container_id, counts) VALUES (?, ?, ?, ?, ?)"
            )
            for p in points {
                try statement.execute(arguments: [
                    resolution.rawValue, p.at.microseconds, p.scope.appId ?? "", p.scope.containerId ?? "", p.counts.encodedFields,
                ])
            }
        }
    }

    public func history(_ scope: FleetScope, resolution: HistoryResolution, from: Timestamp, to: Timestamp) async throws -> [HistoryPoint] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT at, counts FROM fleet_history
                    WHERE resolution = ? AND app_id = ? AND container_id = ? AND at >= ? AND at <= ? ORDER BY at
                    """,
                arguments: [resolution.rawValue, scope.appId ?? "", scope.containerId ?? "", from.microseconds, to.microseconds]
            ).map { row in
                HistoryPoint(at: Timestamp(microseconds: row[0]), scope: scope, counts: FleetCounts(encodedFields: row[1]))
            }
        }
    }

    public func pruneHistory(_ resolution: HistoryResolution, before cutoff: Timestamp) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "DELETE FROM fleet_history WHERE resolution = ? AND at < ?",
                arguments: [resolution.rawValue, cutoff.microseconds]
            )
        }
    }
}
