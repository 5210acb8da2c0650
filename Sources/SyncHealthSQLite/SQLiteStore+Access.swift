import Foundation
import GRDB
public import SyncHealthCore
public import SyncHealthStore

extension SQLiteStore {
    public func keys() async throws -> [StoredKey] {
        // Read every 500 ms (`KeyDirectory`): the statement is prepared once per connection, which is most of the
        // read's cost while there are few keys.
        try await pool.read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT id, role, app_ids, description, secret_digest, created_at, expires_at, revoked_at, last_used_at, created_by
                        FROM api_keys ORDER BY created_at, id
                        """
                )
            )
            .map { row in
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
        }
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
