import Foundation
import GRDB
public import SyncHealthCore
public import SyncHealthStore

extension SQLiteStore {
    public func keyChanges(after seq: Int64) async throws -> KeyChanges {
        // Read every 500 ms (`KeyDirectory`): an index probe that finds nothing while no key changed. One read
        // transaction: the counter and the rows are of one moment.
        try await pool.read { db in
            let through = try Int64.fetchOne(db.cachedStatement(sql: "SELECT seq FROM api_key_changes")) ?? 0
            let changes = try Row.fetchAll(
                db.cachedStatement(sql: "SELECT \(Self.keyColumns), change_seq FROM api_keys WHERE change_seq > ? ORDER BY change_seq"),
                arguments: [seq]
            )
            .map { KeyChange(key: Self.key($0), seq: $0[10]) }
            return KeyChanges(changes: changes, through: through)
        }
    }

    public func keys(after position: KeyPosition?, limit: Int) async throws -> [StoredKey] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.keyColumns) FROM api_keys
                    WHERE created_at > ? OR (created_at = ? AND id > ?) ORDER BY created_at, id LIMIT ?
                    """,
                arguments: [position?.createdAt.microseconds ?? Int64.min, position?.createdAt.microseconds ?? Int64.min, position?.id ?? "", limit]
            )
            .map(Self.key)
        }
    }

    public func deleteKeys(ids: [String]) async throws -> Int {
        guard !ids.isEmpty else { return 0 }
        return try await pool.write { db in
            var count = 0
            for id in ids {
                try db.execute(sql: "DELETE FROM api_keys WHERE id = ?", arguments: [id])
                count += db.changesCount
            }
            return count
        }
    }

    private static let keyColumns =
        "id, role, app_ids, description, secret_digest, created_at, expires_at, revoked_at, last_used_at, created_by"

    /// A key from a row that starts with `keyColumns`.
    private static func key(_ row: Row) -> StoredKey {
        StoredKey(
            id: row[0],
            role: row[1],
            appIds: StoredKey.appIds(json: row[2]),
            description: row[3],
            secretDigest: [UInt8](row[4] as Data),
            createdAt: Timestamp(microseconds: row[5]),
            expiresAt: (row[6] as Int64?).map(Timestamp.init(microseconds:)),
            revokedAt: (row[7] as Int64?).map(Timestamp.init(microseconds:)),
            lastUsedAt: (row[8] as Int64?).map(Timestamp.init(microseconds:)),
            createdBy: row[9]
        )
    }

    public func insertKey(_ key: StoredKey) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO api_keys (id, role, app_ids, description, secret_digest, created_at, expires_at, revoked_at, last_used_at, created_by)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING
                    """,
                arguments: [
                    key.id, key.role, key.appIdsJSON, key.description, Data(key.secretDigest), key.createdAt.microseconds,
                    key.expiresAt?.microseconds, key.revokedAt?.microseconds, key.lastUsedAt?.microseconds, key.createdBy,
                ]
            )
        }
    }

    public func revokeKey(id: String, at: Timestamp) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?", arguments: [at.microseconds, id])
            return db.changesCount > 0
        }
    }

    public func touchKeys(_ used: [String: Timestamp]) async throws {
        guard !used.isEmpty else { return }
        try await pool.write { db in
            for (id, at) in used {
                try db.execute(
                    sql: "UPDATE api_keys SET last_used_at = MAX(COALESCE(last_used_at, 0), ?) WHERE id = ?",
                    arguments: [at.microseconds, id]
                )
            }
        }
    }

    public func appendAudit(_ entry: AuditEntry) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "INSERT INTO audit_log (at, key_id, action, target, address) VALUES (?, ?, ?, ?, ?)",
                arguments: [entry.at.microseconds, entry.keyId, entry.action, entry.target, entry.address]
            )
        }
    }

    public func auditEntries(before: Int64?, limit: Int) async throws -> [AuditEntry] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT seq, at, key_id, action, target, address FROM audit_log WHERE seq < ? ORDER BY seq DESC LIMIT ?",
                arguments: [before ?? Int64.max, limit]
            )
            .map { row in
                AuditEntry(seq: row[0], at: Timestamp(microseconds: row[1]), keyId: row[2], action: row[3], target: row[4], address: row[5])
            }
        }
    }

    public func pruneAudit(before cutoff: Timestamp, limit: Int) async throws -> Int {
        try await pool.write { db in
            try db.execute(
                sql: "DELETE FROM audit_log WHERE seq IN (SELECT seq FROM audit_log WHERE at < ? ORDER BY seq LIMIT ?)",
                arguments: [cutoff.microseconds, limit]
            )
            return db.changesCount
        }
    }
}
