public import SyncHealthCore

/// A device's App Attest key, kept after its attestation verified (`POST /v1/attest`). One key a device and one device
/// a key: a newer key replaces the older only with a proof from the older (or after the device was erased).
public struct DeviceAttestation: Sendable, Hashable {
    public var device: DeviceKey
    /// SHA-256 of the public key.
    public var keyId: [UInt8]
    /// P-256, X9.62 uncompressed.
    public var publicKey: [UInt8]
    /// `production` or `development`.
    public var environment: String
    /// Apple's receipt, for asking Apple for the device's fraud-risk metric.
    public var receipt: [UInt8]
    /// The counter of the last assertion accepted (0 after the attestation).
    public var counter: UInt32
    public var attestedAt: Timestamp

    /// Creates a record.
    public init(
        device: DeviceKey,
        keyId: [UInt8],
        publicKey: [UInt8],
        environment: String,
        receipt: [UInt8],
        counter: UInt32 = 0,
        attestedAt: Timestamp
    ) {
        self.device = device
        self.keyId = keyId
        self.publicKey = publicKey
        self.environment = environment
        self.receipt = receipt
        self.counter = counter
        self.attestedAt = attestedAt
    }
}

/// A secret that signs device tokens (`POST /v1/attest/token`), kept in the store so that every replica verifies
/// what any replica signed. Rotated: new tokens are signed with the newest, older ones verify until they expire.
public struct DeviceTokenSecret: Sendable, Hashable {
    /// Eight random bytes, named in each token it signs.
    public var id: [UInt8]
    /// 32 random bytes, the HMAC-SHA256 key.
    public var secret: [UInt8]
    public var createdAt: Timestamp

    /// Creates a secret record.
    public init(id: [UInt8], secret: [UInt8], createdAt: Timestamp) {
        self.id = id
        self.secret = secret
        self.createdAt = createdAt
    }
}

/// A key that stopped being its device's (replaced by a new attestation, or the device erased): device tokens made
/// for it are refused from then on, on every replica.
public struct AttestationRevocation: Sendable, Hashable {
    /// Increasing in the order revocations were written: a replica reads those after the last it saw.
    public var seq: Int64
    public var appId: String
    public var keyId: [UInt8]
    public var revokedAt: Timestamp

    /// Creates a revocation record.
    public init(seq: Int64, appId: String, keyId: [UInt8], revokedAt: Timestamp) {
        self.seq = seq
        self.appId = appId
        self.keyId = keyId
        self.revokedAt = revokedAt
    }
}

/// What `saveAttestation` did.
public enum AttestationSave: Sendable, Hashable {
    /// Kept: the device had no key, or its key (the one `replacing` named) was replaced; `replaced` is that key.
    case saved(replaced: [UInt8]?)
    /// The key is already this device's: its row and counter are kept as they were.
    case unchanged
    /// The device has another key, and `replacing` did not name it.
    case deviceBound(keyId: [UInt8])
    /// The key is another device's.
    case keyInUse
}

/// Where App Attest's one-time challenges and the devices' attested keys are kept: in the store, so that a challenge
/// issued by one replica is redeemed on another, and a counter moved on one refuses a replay on all.
public protocol AttestationStore: Sendable {
    /// Keeps a one-time challenge for an app until `expiresAt`.
    func insertChallenge(_ challenge: [UInt8], appId: String, expiresAt: Timestamp) async throws
    /// Uses a challenge up: `true` when it was issued for this app and had not expired at `now`. It is gone after
    /// this call whatever the answer, so a challenge is redeemed at most once.
    func consumeChallenge(_ challenge: [UInt8], appId: String, now: Timestamp) async throws -> Bool
    /// Forgets at most `limit` challenges that expired before `cutoff`; returns how many.
    func pruneChallenges(before cutoff: Timestamp, limit: Int) async throws -> Int
    /// Keeps a device's attested key, atomically on every replica: a device id stays bound to its key, and a key to
    /// its device id. The device's key is replaced only when `replacing` names it (the caller has checked a proof
    /// from that key); the same key saved again for the same device keeps its row, counter included. A replaced key
    /// is revoked (`attestationRevocations`) in the same write.
    func saveAttestation(_ attestation: DeviceAttestation, replacing: [UInt8]?) async throws -> AttestationSave
    /// The attested key with this id, of any device of this app.
    func attestation(appId: String, keyId: [UInt8]) async throws -> DeviceAttestation?
    /// The device's attested key.
    func attestation(of device: DeviceKey) async throws -> DeviceAttestation?
    /// The attested keys of these devices (those that have one), for a page of a device list.
    func attestations(of devices: [DeviceKey]) async throws -> [DeviceKey: DeviceAttestation]
    /// Moves a key's counter to `counter` if that is above the stored one, and notes the app version the signed upload
    /// named (`nil`: none); `false` when it is not above (a replay, or an assertion that lost a race with a later
    /// one) or there is no such key. Atomic: of two calls with the same counter, on any replicas, one wins.
    func advanceCounter(appId: String, keyId: [UInt8], to counter: UInt32, appVersion: String?) async throws -> Bool
    /// Devices of the app with an attested key, by the app version of their last signed upload (`""` for none).
    func attestedDevicesByAppVersion(appId: String) async throws -> [String: Int]
    /// How many devices of the app (every app when `nil`) have an attested key, by environment.
    func attestedDevices(appId: String?) async throws -> [String: Int]
    /// Forgets a device's key (the device's erasure), and revokes it at `now` in the same write.
    func deleteAttestation(of device: DeviceKey, at now: Timestamp) async throws
    /// The secrets that sign device tokens, oldest first.
    func deviceTokenSecrets() async throws -> [DeviceTokenSecret]
    /// Keeps a new secret.
    func insertDeviceTokenSecret(_ secret: DeviceTokenSecret) async throws
    /// Forgets the secrets made before `cutoff` (no unexpired token names them).
    func deleteDeviceTokenSecrets(createdBefore cutoff: Timestamp) async throws
    /// At most `limit` revocations written after `seq`, in `seq` order.
    func attestationRevocations(after seq: Int64, limit: Int) async throws -> [AttestationRevocation]
    /// Forgets revocations made before `cutoff` (every token made for their keys has expired).
    func pruneAttestationRevocations(before cutoff: Timestamp) async throws
}
