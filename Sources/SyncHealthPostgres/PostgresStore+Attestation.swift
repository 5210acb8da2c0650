import PostgresNIO
public import SyncHealthCore
public import SyncHealthStore

extension PostgresStore {
    public func insertChallenge(_ challenge: [UInt8], appId: String, expiresAt: Timestamp) async throws {
        try await run(
            "INSERT INTO attest_challenges (challenge, app_id, expires_at) VALUES (\(ByteBuffer(bytes: challenge)), \(appId), \(expiresAt.microseconds))",
            logger: logger
        )
    }

    public func consumeChallenge(_ challenge: [UInt8], appId: String, now: Timestamp) async throws -> Bool {
        let rows = try await run(
            "DELETE FROM attest_challenges WHERE challenge = \(ByteBuffer(bytes: challenge)) RETURNING app_id, expires_at",
            logger: logger
        )
        var valid = false
        for try await (issuedFor, expiresAt) in rows.decode((String, Int64).self) {
            valid = issuedFor == appId && now.microseconds < expiresAt
        }
        return valid
    }

    public func pruneChallenges(before cutoff: Timestamp, limit: Int) async throws -> Int {
        let rows = try await run(
            """
            DELETE FROM attest_challenges WHERE challenge IN
                (SELECT challenge FROM attest_challenges WHERE expires_at < \(cutoff.microseconds) LIMIT \(limit))
            RETURNING expires_at
            """,
            logger: logger
        )
        var count = 0
        for try await _ in rows.decode(Int64.self) { count += 1 }
        return count
    }

    public func saveAttestation(_ a: DeviceAttestation, replacing: [UInt8]?) async throws -> AttestationSave {
        // A first save of the same device or key on another replica can commit between this transaction's read and
        // its insert (nothing to lock yet): the insert then does nothing, and the next attempt reads that row.
        for _ in 0..<3 {
            if let outcome = try await saveAttestationOnce(a, replacing: replacing) { return outcome }
        }
        throw StoreError.unavailable(path: "device_attestations", reason: "an attestation of this device or key kept changing")
    }

    private func saveAttestationOnce(_ a: DeviceAttestation, replacing: [UInt8]?) async throws -> AttestationSave? {
        try await withTransaction { connection -> AttestationSave? in
            let key = ByteBuffer(bytes: a.keyId)
            // The key's row and the device's row, locked: a concurrent save of either waits for this one.
            let rows = try await connection.query(
                """
                SELECT app_id, device_id, key_id FROM device_attestations
                WHERE key_id = \(key) OR (app_id = \(a.device.appId) AND device_id = \(a.device.deviceId))
                FOR UPDATE
                """,
                logger: logger
            )
            var owner: DeviceKey?
            var current: [UInt8]?
            for try await (appId, deviceId, keyId) in rows.decode((String, String, ByteBuffer).self) {
                let id = Array(buffer: keyId)
                if id == a.keyId { owner = DeviceKey(appId: appId, deviceId: deviceId) }
                if appId == a.device.appId && deviceId == a.device.deviceId { current = id }
            }
            if let owner { return owner == a.device ? .unchanged : .keyInUse }
            if let current {
                guard current == replacing else { return .deviceBound(keyId: current) }
                try await connection.query("DELETE FROM device_attestations WHERE key_id = \(ByteBuffer(bytes: current))", logger: logger)
                try await connection.query(
                    """
                    INSERT INTO attestation_revocations (app_id, key_id, revoked_at)
                    VALUES (\(a.device.appId), \(ByteBuffer(bytes: current)), \(a.attestedAt.microseconds))
                    """,
                    logger: logger
                )
            }
            let inserted = try await connection.query(
                """
                INSERT INTO device_attestations (key_id, app_id, device_id, public_key, environment, receipt, counter, attested_at)
                VALUES (\(key), \(a.device.appId), \(a.device.deviceId), \(ByteBuffer(bytes: a.publicKey)),
                        \(a.environment), \(ByteBuffer(bytes: a.receipt)), \(Int64(a.counter)), \(a.attestedAt.microseconds))
                ON CONFLICT DO NOTHING
                RETURNING counter
                """,
                logger: logger
            )
            for try await _ in inserted.decode(Int64.self) { return .saved(replaced: current) }
            return nil
        }
    }

    public func attestation(appId: String, keyId: [UInt8]) async throws -> DeviceAttestation? {
        try await attestations(
            run(
                """
                SELECT app_id, device_id, key_id, public_key, environment, receipt, counter, attested_at FROM device_attestations
                WHERE app_id = \(appId) AND key_id = \(ByteBuffer(bytes: keyId))
                """,
                logger: logger
            )
        ).first
    }

    public func attestation(of device: DeviceKey) async throws -> DeviceAttestation? {
        try await attestations(
            run(
                """
                SELECT app_id, device_id, key_id, public_key, environment, receipt, counter, attested_at FROM device_attestations
                WHERE app_id = \(device.appId) AND device_id = \(device.deviceId)
                """,
                logger: logger
            )
        ).first
    }

    public func attestations(of devices: [DeviceKey]) async throws -> [DeviceKey: DeviceAttestation] {
        guard !devices.isEmpty else { return [:] }
        let found = try await attestations(
            run(
                """
                SELECT a.app_id, a.device_id, a.key_id, a.public_key, a.environment, a.receipt, a.counter, a.attested_at
                FROM device_attestations a
                JOIN UNNEST(\(devices.map(\.appId)), \(devices.map(\.deviceId))) AS wanted(app_id, device_id)
                  ON a.app_id = wanted.app_id AND a.device_id = wanted.device_id
                """,
                logger: logger
            )
        )
        return Dictionary(found.map { ($0.device, $0) }, uniquingKeysWith: { _, last in last })
    }

    private func attestations(_ rows: PostgresRowSequence) async throws -> [DeviceAttestation] {
        var found: [DeviceAttestation] = []
        for try await (appId, deviceId, keyId, publicKey, environment, receipt, counter, attestedAt) in rows.decode(
            (String, String, ByteBuffer, ByteBuffer, String, ByteBuffer, Int64, Int64).self
        ) {
            found.append(
                DeviceAttestation(
                    device: DeviceKey(appId: appId, deviceId: deviceId),
                    keyId: Array(buffer: keyId),
                    publicKey: Array(buffer: publicKey),
                    environment: environment,
                    receipt: Array(buffer: receipt),
                    counter: UInt32(clamping: counter),
                    attestedAt: Timestamp(microseconds: attestedAt)
                )
            )
        }
        return found
    }

    public func advanceCounter(appId: String, keyId: [UInt8], to counter: UInt32, appVersion: String?) async throws -> Bool {
        let rows = try await run(
            """
            UPDATE device_attestations SET counter = \(Int64(counter)), app_version = \(appVersion)
            WHERE app_id = \(appId) AND key_id = \(ByteBuffer(bytes: keyId)) AND counter < \(Int64(counter))
            RETURNING counter
            """,
            logger: logger
        )
        for try await _ in rows.decode(Int64.self) { return true }
        return false
    }

    public func attestedDevicesByAppVersion(appId: String) async throws -> [String: Int] {
        let rows = try await run(
            "SELECT COALESCE(app_version, ''), COUNT(*) FROM device_attestations WHERE app_id = \(appId) GROUP BY 1",
            logger: logger
        )
        var counts: [String: Int] = [:]
        for try await (version, count) in rows.decode((String, Int64).self) { counts[version, default: 0] += Int(count) }
        return counts
    }

    public func attestedDevices(appId: String?) async throws -> [String: Int] {
        let rows = try await run(
            """
            SELECT environment, COUNT(*) FROM device_attestations
            WHERE \(appId)::TEXT IS NULL OR app_id = \(appId) GROUP BY environment
            """,
            logger: logger
        )
        var counts: [String: Int] = [:]
        for try await (environment, count) in rows.decode((String, Int64).self) { counts[environment] = Int(count) }
        return counts
    }

    public func deleteAttestation(of device: DeviceKey, at now: Timestamp) async throws {
        // One statement: the key's row goes and its revocation is written together.
        try await run(
            """
            WITH gone AS (
                DELETE FROM device_attestations WHERE app_id = \(device.appId) AND device_id = \(device.deviceId) RETURNING key_id
            )
            INSERT INTO attestation_revocations (app_id, key_id, revoked_at) SELECT \(device.appId), key_id, \(now.microseconds) FROM gone
            """,
            logger: logger
        )
    }

    public func deviceTokenSecrets() async throws -> [DeviceTokenSecret] {
        let rows = try await run("SELECT id, secret, created_at FROM device_token_secrets ORDER BY created_at", logger: logger)
        var secrets: [DeviceTokenSecret] = []
        for try await (id, secret, createdAt) in rows.decode((ByteBuffer, ByteBuffer, Int64).self) {
            secrets.append(DeviceTokenSecret(id: Array(buffer: id), secret: Array(buffer: secret), createdAt: Timestamp(microseconds: createdAt)))
        }
        return secrets
    }

    public func insertDeviceTokenSecret(_ secret: DeviceTokenSecret) async throws {
        try await run(
            """
            INSERT INTO device_token_secrets (id, secret, created_at)
            VALUES (\(ByteBuffer(bytes: secret.id)), \(ByteBuffer(bytes: secret.secret)), \(secret.createdAt.microseconds))
            """,
            logger: logger
        )
    }

    public func deleteDeviceTokenSecrets(createdBefore cutoff: Timestamp) async throws {
        try await run("DELETE FROM device_token_secrets WHERE created_at < \(cutoff.microseconds)", logger: logger)
    }

    public func attestationRevocations(after seq: Int64, limit: Int) async throws -> [AttestationRevocation] {
        let rows = try await run(
            "SELECT seq, app_id, key_id, revoked_at FROM attestation_revocations WHERE seq > \(seq) ORDER BY seq LIMIT \(limit)",
            logger: logger
        )
        var found: [AttestationRevocation] = []
        for try await (seq, appId, keyId, revokedAt) in rows.decode((Int64, String, ByteBuffer, Int64).self) {
            found.append(AttestationRevocation(seq: seq, appId: appId, keyId: Array(buffer: keyId), revokedAt: Timestamp(microseconds: revokedAt)))
        }
        return found
    }

    public func pruneAttestationRevocations(before cutoff: Timestamp) async throws {
        try await run("DELETE FROM attestation_revocations WHERE revoked_at < \(cutoff.microseconds)", logger: logger)
    }
}
