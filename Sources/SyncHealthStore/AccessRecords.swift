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

/// A key as a change to the key table left it: `seq` grows with every write that changes what the key grants
/// (its creation, its revocation), in the order those writes were committed, so that a replica that has read up
/// to a `seq` reads only what came after it. A last use is not such a change.
public struct KeyChange: Sendable, Hashable {
    public var key: StoredKey
    /// The change's place in the key table's history; at least 1.
    public var seq: Int64

    /// Creates a change.
    public init(key: StoredKey, seq: Int64) {
        self.key = key
        self.seq = seq
    }
}

/// What a read of the key table's changes found.
public struct KeyChanges: Sendable, Hashable {
    /// The keys changed after the number asked for, in the order of their changes.
    public var changes: [KeyChange]
    /// The last number given before the read: every key whose last change is numbered at most this is in a read of
    /// every key (`after: 0`), unless it was deleted.
    public var through: Int64

    /// Creates a read's result.
    public init(changes: [KeyChange], through: Int64) {
        self.changes = changes
        self.through = through
    }
}

/// Where a page of `GET /v1/keys` ends: keys are listed by creation time, then id.
public struct KeyPosition: Sendable, Hashable, Comparable {
    public var createdAt: Timestamp
    public var id: String

    /// Creates a position.
    public init(createdAt: Timestamp, id: String) {
        self.createdAt = createdAt
        self.id = id
    }

    /// The position just after `key`.
    public init(after key: StoredKey) { self.init(createdAt: key.createdAt, id: key.id) }

    public static func < (a: KeyPosition, b: KeyPosition) -> Bool { (a.createdAt, a.id) < (b.createdAt, b.id) }
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
    /// The keys created or revoked after the change `seq` (0 for every stored key), in the order of their changes.
    func keyChanges(after seq: Int64) async throws -> KeyChanges
    /// At most `limit` stored keys after `position` (from the oldest when `nil`), revoked and expired ones included,
    /// oldest first.
    func keys(after position: KeyPosition?, limit: Int) async throws -> [StoredKey]
    /// Writes a new key.
    func insertKey(_ key: StoredKey) async throws
    /// Marks a key revoked at `at`; `false` when there is no such key. Revoking twice keeps the first time.
    func revokeKey(id: String, at: Timestamp) async throws -> Bool
    /// Forgets the keys `ids` (revoked or expired long ago); returns how many there were.
    func deleteKeys(ids: [String]) async throws -> Int
    /// Moves each key's `lastUsedAt` forward to the time given (never back).
    func touchKeys(_ used: [String: Timestamp]) async throws
    /// Appends an entry to the audit log.
    func appendAudit(_ entry: AuditEntry) async throws
    /// A page of the audit log, newest first: entries with `seq` below `before` (all when `nil`).
    func auditEntries(before: Int64?, limit: Int) async throws -> [AuditEntry]
    /// Forgets at most `limit` audit entries older than `cutoff`; returns how many.
    func pruneAudit(before cutoff: Timestamp, limit: Int) async throws -> Int
}
