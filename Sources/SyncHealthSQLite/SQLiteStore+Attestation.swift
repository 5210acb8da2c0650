import Foundation
import GRDB
public import SyncHealthCore
public import SyncHealthStore

extension SQLiteStore {
    public func insertChallenge(_ challenge: [UInt8], appId: String, expiresAt: Timestamp) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "INSERT INTO attest_challenges (challenge, app_id, expires_at) VALUES (?, ?, ?)",
                arguments: [Data(challenge), appId, expiresAt.microseconds]
            )
        }
    }

    public func consumeChallenge(_ challenge: [UInt8], appId: String, now: Timestamp) async throws -> Bool {
        try await pool.write { db in
            let row = try Row.fetchOne(
                db,
                sql: "DELETE FROM attest_challenges WHERE challenge = ? RETURNING app_id, expires_at",
                arguments: [Data(challenge)]
            )
            guard let row else { return false }
            return (row[0] as String) == appId && now.microseconds < (row[1] as Int64)
        }
    }

    public func pruneChallenges(before cutoff: Timestamp, limit: Int) async throws -> Int {
        try await pool.write { db in
            try db.execute(
                sql: "DELETE FROM attest_challenges WHERE challenge IN (SELECT challenge FROM attest_challenges WHERE expires_at < ? LIMIT ?)",
                arguments: [cutoff.microseconds, limit]
            )
            return db.changesCount
        }
    }

    public func saveAttestation(_ a: DeviceAttestation, replacing: [UInt8]?) async throws -> AttestationSave {
        try await pool.write { [counters] db in
            if let owner = try Row.fetchOne(db, sql: "SELECT app_id, device_id FROM device_attestations WHERE key_id = ?", arguments: [Data(a.keyId)])
            {
                return (owner[0] as String) == a.device.appId && (owner[1] as String) == a.device.deviceId ? .unchanged : .keyInUse
            }
            var replaced: [UInt8]?
            if let current = try Data.fetchOne(
                db,
                sql: "SELECT key_id FROM device_attestations WHERE app_id = ? AND device_id = ?",
                arguments: [a.device.appId, a.device.deviceId]
            ) {
                guard [UInt8](current) == replacing else { return .deviceBound(keyId: [UInt8](current)) }
                try db.execute(sql: "DELETE FROM device_attestations WHERE key_id = ?", arguments: [current])
                try Self.revoke(db, appId: a.device.appId, keyId: [UInt8](current), at: a.attestedAt)
                replaced = [UInt8](current)
            }
            // In the transaction: a move held for a replaced key is not written over the new row.
            counters.forget(
                [CounterBook.Key(appId: a.device.appId, keyId: a.keyId)]
                    + (replaced.map { [CounterBook.Key(appId: a.device.appId, keyId: $0)] } ?? [])
            )
            try db.execute(
                sql: """
                    INSERT INTO device_attestations (key_id, app_id, device_id, public_key, environment, receipt, counter, attested_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    Data(a.keyId), a.device.appId, a.device.deviceId, Data(a.publicKey), a.environment, Data(a.receipt), Int64(a.counter),
                    a.attestedAt.microseconds,
                ]
            )
            return .saved(replaced: replaced)
        }
    }

    public func attestation(appId: String, keyId: [UInt8]) async throws -> DeviceAttestation? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: Self.attestationColumns + " WHERE app_id = ? AND key_id = ?", arguments: [appId, Data(keyId)])
                .map(Self.attestation(row:))
        }
        .map(withHeldCounter)
    }

    public func attestation(of device: DeviceKey) async throws -> DeviceAttestation? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: Self.attestationColumns + " WHERE app_id = ? AND device_id = ?", arguments: [device.appId, device.deviceId])
                .map(Self.attestation(row:))
        }
        .map(withHeldCounter)
    }

    public func attestations(of devices: [DeviceKey]) async throws -> [DeviceKey: DeviceAttestation] {
        guard !devices.isEmpty else { return [:] }
        return try await pool.read { db in
            var found: [DeviceKey: DeviceAttestation] = [:]
            // One lookup a device on the unique (app_id, device_id) index: a page holds at most a thousand.
            let statement = try db.cachedStatement(sql: Self.attestationColumns + " WHERE app_id = ? AND device_id = ?")
            for device in devices {
                if let row = try Row.fetchOne(statement, arguments: [device.appId, device.deviceId]) {
                    found[device] = Self.attestation(row: row)
                }
            }
            return found
        }
        .mapValues(withHeldCounter)
    }

    public func advanceCounter(appId: String, keyId: [UInt8], to counter: UInt32, appVersion: String?) async throws -> Bool {
        try await counters.advance(CounterBook.Key(appId: appId, keyId: keyId), to: counter, appVersion: appVersion) { [pool] in
            try await pool.read { db in
                try Row.fetchOne(
                    db,
                    sql: "SELECT counter, app_version FROM device_attestations WHERE app_id = ? AND key_id = ?",
                    arguments: [appId, Data(keyId)]
                )
                .map { CounterBook.Entry(counter: UInt32(clamping: $0[0] as Int64), appVersion: $0[1]) }
            }
        }
    }

    public func attestedDevicesByAppVersion(appId: String) async throws -> [String: Int] {
        try await flushCounters()
        return try await pool.read { db in
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT COALESCE(app_version, ''), COUNT(*) FROM device_attestations WHERE app_id = ? GROUP BY 1",
                arguments: [appId]
            )
            return Dictionary(rows.map { ($0[0] as String, $0[1] as Int) }, uniquingKeysWith: +)
        }
    }

    /// Writes the counter moves held in memory (`CounterBook`).
    func flushCounters() async throws {
        if counters.hasMoves { try await counters.flush(pool) }
    }

    /// `row` with the counter this process holds for its key, which may be ahead of the table's.
    func withHeldCounter(_ attestation: DeviceAttestation) -> DeviceAttestation {
        var attestation = attestation
        if let held = counters.counter(of: CounterBook.Key(appId: attestation.device.appId, keyId: attestation.keyId)) {
            attestation.counter = max(attestation.counter, held)
        }
        return attestation
    }

    public func attestedDevices(appId: String?) async throws -> [String: Int] {
        try await pool.read { db in
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT environment, COUNT(*) FROM device_attestations WHERE ? IS NULL OR app_id = ? GROUP BY environment",
                arguments: [appId, appId]
            )
            return Dictionary(uniqueKeysWithValues: rows.map { ($0[0] as String, $0[1] as Int) })
        }
    }

    public func deleteAttestation(of device: DeviceKey, at now: Timestamp) async throws {
        try await pool.write { [counters] db in
            let deleted = try Row.fetchAll(
                db,
                sql: "DELETE FROM device_attestations WHERE app_id = ? AND device_id = ? RETURNING key_id",
                arguments: [device.appId, device.deviceId]
            )
            for row in deleted { try Self.revoke(db, appId: device.appId, keyId: [UInt8](row[0] as Data), at: now) }
            counters.forget(deleted.map { CounterBook.Key(appId: device.appId, keyId: [UInt8]($0[0] as Data)) })
        }
    }

    static func revoke(_ db: Database, appId: String, keyId: [UInt8], at: Timestamp) throws {
        try db.execute(
            sql: "INSERT INTO attestation_revocations (app_id, key_id, revoked_at) VALUES (?, ?, ?)",
            arguments: [appId, Data(keyId), at.microseconds]
        )
    }

    public func deviceTokenSecrets() async throws -> [DeviceTokenSecret] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT id, secret, created_at FROM device_token_secrets ORDER BY created_at").map {
                DeviceTokenSecret(id: [UInt8]($0[0] as Data), secret: [UInt8]($0[1] as Data), createdAt: Timestamp(microseconds: $0[2]))
            }
        }
    }

    public func insertDeviceTokenSecret(_ secret: DeviceTokenSecret) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "INSERT INTO device_token_secrets (id, secret, created_at) VALUES (?, ?, ?)",
                arguments: [Data(secret.id), Data(secret.secret), secret.createdAt.microseconds]
            )
        }
    }

    public func deleteDeviceTokenSecrets(createdBefore cutoff: Timestamp) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM device_token_secrets WHERE created_at < ?", arguments: [cutoff.microseconds])
        }
    }

    public func attestationRevocations(after seq: Int64, limit: Int) async throws -> [AttestationRevocation] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT seq, app_id, key_id, revoked_at FROM attestation_revocations WHERE seq > ? ORDER BY seq LIMIT ?",
                arguments: [seq, limit]
            )
            .map { AttestationRevocation(seq: $0[0], appId: $0[1], keyId: [UInt8]($0[2] as Data), revokedAt: Timestamp(microseconds: $0[3])) }
        }
    }

    public func pruneAttestationRevocations(before cutoff: Timestamp) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM attestation_revocations WHERE revoked_at < ?", arguments: [cutoff.microseconds])
        }
    }

    static let attestationColumns =
        "SELECT app_id, device_id, key_id, public_key, environment, receipt, counter, attested_at FROM device_attestations"

    static func attestation(row: Row) -> DeviceAttestation {
        DeviceAttestation(
            device: DeviceKey(appId: row[0], deviceId: row[1]),
            keyId: [UInt8](row[2] as Data),
            publicKey: [UInt8](row[3] as Data),
            environment: row[4],
            receipt: [UInt8](row[5] as Data),
            counter: UInt32(clamping: row[6] as Int64),
            attestedAt: Timestamp(microseconds: row[7])
        )
    }
}
