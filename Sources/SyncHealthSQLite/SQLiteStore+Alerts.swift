import GRDB
import SyncHealthCore
public import SyncHealthStore
import Synchronization

extension SQLiteStore {
    /// Folds before a read of the alerts table when the backlog holds a change to it, so that the read sees every
    /// committed transition. Only then: the incident watch reads every firing alert a page at a time, every few
    /// seconds, and a fold a page was 50 folds in a second on the writer at 50,000 firing alerts.
    fileprivate func foldForAlerts() async throws {
        if backlog.withLock({ $0.changesAlerts }) { try await fold() }
    }

    public func alerts(_ query: AlertQuery) async throws -> AlertPage {
        try await foldForAlerts()
        return try await pool.read { db in
            var conditions: [String] = []
            var arguments: [any DatabaseValueConvertible] = []
            if let cursor = query.cursor {
                conditions.append("seq < ?")
                arguments.append(cursor)
            }
            if let state = query.state {
                conditions.append("state = ?")
                arguments.append(state.rawValue)
            }
            if let kind = query.kind {
                conditions.append("kind = ?")
                arguments.append(kind.rawValue)
            }
            if let appId = query.appId {
                conditions.append("app_id = ?")
                arguments.append(appId)
            }
            if let deviceId = query.deviceId {
                conditions.append("device_id = ?")
                arguments.append(deviceId)
            }
            let whereClause = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
            arguments.append(query.limit + 1)
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.alertColumns)
                    FROM alerts \(whereClause) ORDER BY seq DESC LIMIT ?
                    """,
                arguments: StatementArguments(arguments)
            )
            let alerts = try rows.prefix(query.limit).map(Self.alert)
            let next: Int64? = rows.count > query.limit ? rows[query.limit - 1][0] : nil
            return AlertPage(alerts: alerts, nextCursor: next)
        }
    }

    /// The columns `alert(_:)` decodes.
    static let alertColumns = "seq, id, kind, state, app_id, device_id, container_id, starts_at, ends_at, summary, detail, reason, app_version"

    /// An alert from a row of `alertColumns`.
    static func alert(_ row: Row) throws -> AlertRecord {
        guard let kind = AlertKind(rawValue: row[2]), let state = AlertState(rawValue: row[3]) else {
            throw StoreError.undecodableRecord("alert \(String(describing: row[1] as String?))")
        }
        return AlertRecord(
            id: row[1],
            kind: kind,
            state: state,
            deviceId: row[5],
            appId: row[4],
            containerId: row[6],
            startsAt: Timestamp(microseconds: row[7]),
            endsAt: (row[8] as Int64?).map(Timestamp.init(microseconds:)),
            summary: row[9],
            detail: row[10],
            reason: (row[11] as String?).flatMap(ResolveReason.init(rawValue:)),
            appVersion: row[12]
        )
    }

    public func recentTransitions(limit: Int) async throws -> [AlertRecord] {
        try await foldForAlerts()
        return try await pool.read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.alertColumns)
                    FROM alerts
                    WHERE seq IN (SELECT seq FROM alerts ORDER BY seq DESC LIMIT ?)
                       OR seq IN (SELECT seq FROM alerts WHERE state = 'resolved' ORDER BY ends_at DESC LIMIT ?)
                    ORDER BY seq
                    """,
                arguments: [limit, limit]
            )
            return AlertTransitions.recent(try rows.map(Self.alert), limit: limit)
        }
    }
}
