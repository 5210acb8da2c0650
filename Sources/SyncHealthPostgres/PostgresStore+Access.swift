import PostgresNIO
public import SyncHealthCore
public import SyncHealthStore

extension PostgresStore {
    public func keyChanges(after seq: Int64) async throws -> KeyChanges {
        // The counter first: every key numbered up to it was committed before this read of the rows began.
        var through: Int64 = 0
        for try await value in try await run("SELECT seq FROM api_key_changes", logger: logger).decode(Int64.self) { through = value }
        var changes: [KeyChange] = []
        let rows = try await run(
            "SELECT \(unescaped: Self.keyColumns), change_seq FROM api_keys WHERE change_seq > \(seq) ORDER BY change_seq",
            logger: logger
        )
        for try await (id, role, appIds, description, digest, createdAt, expiresAt, revokedAt, lastUsedAt, createdBy, seq) in rows.decode(
            (String, String, String?, String, ByteBuffer, Int64, Int64?, Int64?, Int64?, String, Int64).self
        ) {
            let key = Self.key((id, role, appIds, description, digest, createdAt, expiresAt, revokedAt, lastUsedAt, createdBy))
            changes.append(KeyChange(key: key, seq: seq))
        }
        return KeyChanges(changes: changes, through: through)
    }

    public func keys(after position: KeyPosition?, limit: Int) async throws -> [StoredKey] {
        var page: [StoredKey] = []
        let rows = try await run(
            """
            SELECT \(unescaped: Self.keyColumns) FROM api_keys
            WHERE (created_at, id) > (\(position?.createdAt.microseconds ?? Int64.min), \(position?.id ?? ""))
            ORDER BY created_at, id LIMIT \(limit)
            """,
            logger: logger
        )
        for try await row in rows.decode(KeyRow.self) { page.append(Self.key(row)) }
        return page
    }

    private typealias KeyRow = (String, String, String?, String, ByteBuffer, Int64, Int64?, Int64?, Int64?, String)

    private static let keyColumns =
        "id, role, app_ids, description, secret_digest, created_at, expires_at, revoked_at, last_used_at, created_by"

    private static func key(_ row: KeyRow) -> StoredKey {
        let (id, role, appIds, description, digest, createdAt, expiresAt, revokedAt, lastUsedAt, createdBy) = row
        return StoredKey(
            id: id,
            role: role,
            appIds: StoredKey.appIds(json: appIds),
            description: description,
            secretDigest: Array(buffer: digest),
            createdAt: Timestamp(microseconds: createdAt),
            expiresAt: expiresAt.map(Timestamp.init(microseconds:)),
            revokedAt: revokedAt.map(Timestamp.init(microseconds:)),
            lastUsedAt: lastUsedAt.map(Timestamp.init(microseconds:)),
            createdBy: createdBy
        )
    }

    public func deleteKeys(ids: [String]) async throws -> Int {
        guard !ids.isEmpty else { return 0 }
        let rows = try await run("DELETE FROM api_keys WHERE id = ANY(\(ids)) RETURNING id", logger: logger)
        var count = 0
        for try await _ in rows.decode(String.self) { count += 1 }
        return count
    }

    public func insertKey(_ key: StoredKey) async throws {
        try await run(
            """
            INSERT INTO api_keys (id, role, app_ids, description, secret_digest, created_at, expires_at, revoked_at, last_used_at, created_by)
            VALUES (\(key.id), \(key.role), \(key.appIdsJSON), \(key.description), \(ByteBuffer(bytes: key.secretDigest)),
                    \(key.createdAt.microseconds), \(key.expiresAt?.microseconds), \(key.revokedAt?.microseconds),
                    \(key.lastUsedAt?.microseconds), \(key.createdBy))
            ON CONFLICT (id) DO NOTHING
            """,
            logger: logger
        )
    }

    public func revokeKey(id: String, at: Timestamp) async throws -> Bool {
        let rows = try await run(
            "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, \(at.microseconds)) WHERE id = \(id) RETURNING id",
            logger: logger
        )
        for try await _ in rows.decode(String.self) { return true }
        return false
    }

    public func touchKeys(_ used: [String: Timestamp]) async throws {
        for (id, at) in used {
            try await run(
                "UPDATE api_keys SET last_used_at = GREATEST(COALESCE(last_used_at, 0), \(at.microseconds)) WHERE id = \(id)",
                logger: logger
            )
        }
    }

    public func appendAudit(_ entry: AuditEntry) async throws {
        try await run(
            """
            INSERT INTO audit_log (at, key_id, action, target, address)
            VALUES (\(entry.at.microseconds), \(entry.keyId), \(entry.action), \(entry.target), \(entry.address))
            """,
            logger: logger
        )
    }

    public func auditEntries(before: Int64?, limit: Int) async throws -> [AuditEntry] {
        var page: [AuditEntry] = []
        let rows = try await run(
            """
            SELECT seq, at, key_id, action, target, address FROM audit_log
            WHERE seq < \(before ?? Int64.max) ORDER BY seq DESC LIMIT \(limit)
            """,
            logger: logger
        )
        for try await (seq, at, keyId, action, target, address) in rows.decode((Int64, Int64, String, String, String, String).self) {
            page.append(AuditEntry(seq: seq, at: Timestamp(microseconds: at), keyId: keyId, action: action, target: target, address: address))
        }
        return page
    }

    public func pruneAudit(before cutoff: Timestamp, limit: Int) async throws -> Int {
        let rows = try await run(
            """
            DELETE FROM audit_log WHERE seq IN (SELECT seq FROM audit_log WHERE at < \(cutoff.microseconds) ORDER BY seq LIMIT \(limit))
            RETURNING seq
            """,
            logger: logger
        )
        var count = 0
        for try await _ in rows.decode(Int64.self) { count += 1 }
        return count
    }
}
