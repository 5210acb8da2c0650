import Foundation
public import SyncHealthCore

/// An API key made through the API (`POST /v1/keys`). The secret itself is never stored: only its SHA-256
/// digest, which the service compares in constant time. Secrets are 256 random bits, so a digest needs no
/// stretching: nothing short of the secret finds it.
public struct StoredKey: Sendable, Hashable {
    /// `key_` + random: how the API names the key. Never a secret.
    public var id: String
    /// `ingest`, `read` or `admin`.
    public var role: String
    /// The apps the key is limited to; `nil` for every app (a global key).
    public var appIds: [String]?
    public var description: String
    /// SHA-256 of the secret.
    public var secretDigest: [UInt8]
    public var createdAt: Timestamp
    /// After this the key is refused; `nil` for never.
    public var expiresAt: Timestamp?
    /// When it was revoked (`DELETE /v1/keys/{id}`); a revoked key is refused and never comes back.
    public var revokedAt: Timestamp?
    /// About when it was last presented (written a few seconds late, at most one write a key a few seconds).
    public var lastUsedAt: Timestamp?
    /// The key that made it: a stored key's id, or `environment` for a key from the configuration.
    public var createdBy: String

    /// Creates a key record.
    public init(
        id: String,
        role: String,
        appIds: [String]?,
        description: String,
        secretDigest: [UInt8],
        createdAt: Timestamp,
        expiresAt: Timestamp? = nil,
        revokedAt: Timestamp? = nil,
        lastUsedAt: Timestamp? = nil,
        createdBy: String
    ) {
        self.id = id
        self.role = role
        self.appIds = appIds
        self.description = description
        self.secretDigest = secretDigest
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.revokedAt = revokedAt
        self.lastUsedAt = lastUsedAt
        self.createdBy = createdBy
    }

    /// The stored JSON of `appIds` (`null` for a global key).
    public var appIdsJSON: String? {
        appIds.flatMap { try? JSONEncoder().encode($0) }.map { String(decoding: $0, as: UTF8.self) }
    }

    /// `appIds` read back from their stored JSON.
    public static func appIds(json: String?) -> [String]? {
        json.flatMap { try? JSONDecoder().decode([String].self, from: Data($0.utf8)) }
    }
}

/// One change made through the API, for `GET /v1/audit`: which key did what, to what, when, from where.
public struct AuditEntry: Sendable, Hashable {
    /// Increasing: the order entries were written in, and the page cursor.
    public var seq: Int64
    public var at: Timestamp
    /// The key that made the change: a stored key's id, or `environment:<role>` for a configured key.
    public var keyId: String
    /// What was done: `key.create`, `key.revoke`, `webhook.create`, `webhook.delete`, `webhook.resend`,
    /// `silence.create`, `silence.delete`, `device.erase`, `backup`.
    public var action: String
    /// What it was done to: a key, subscription, silence or delivery id, or `appId/deviceId`.
    public var target: String
    /// The caller's address as the service saw it.
    public var address: String

    /// Creates an entry; the store assigns `seq` when it writes it.
    public init(seq: Int64 = 0, at: Timestamp, keyId: String, action: String, target: String, address: String) {
        self.seq = seq
        self.at = at
        self.keyId = keyId
        self.action = action
        self.target = target
        self.address = address
    }
}

/// Where API keys and the audit log are kept: a restart keeps them, and replicas sharing a store agree on them.
public protocol AccessStore: Sendable {
    /// Every stored key, revoked and expired ones included, oldest first.
    func keys() async throws -> [StoredKey]
    /// Writes a new key.
    func insertKey(_ key: StoredKey) async throws
    /// Marks a key revoked at `at`; `false` when there is no such key. Revoking twice keeps the first time.
    func revokeKey(id: String, at: Timestamp) async throws -> Bool
    /// Moves each key's `lastUsedAt` forward to the time given (never back).
    func touchKeys(_ used: [String: Timestamp]) async throws
    /// Appends an entry to the audit log.
    func appendAudit(_ entry: AuditEntry) async throws
    /// A page of the audit log, newest first: entries with `seq` below `before` (all when `nil`).
    func auditEntries(before: Int64?, limit: Int) async throws -> [AuditEntry]
    /// Forgets at most `limit` audit entries older than `cutoff`; returns how many.
    func pruneAudit(before cutoff: Timestamp, limit: Int) async throws -> Int
}
