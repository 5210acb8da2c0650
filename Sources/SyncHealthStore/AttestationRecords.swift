public import SyncHealthCore

/// A device's App Attest key, kept after its attestation verified (`POST /v1/attest`). One key a device: a newer
/// attestation of the same device (a reinstall, or a key Apple invalidated) replaces the older.
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
    /// Keeps a device's attested key, replacing any key the device had.
    func saveAttestation(_ attestation: DeviceAttestation) async throws
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
    /// Forgets a device's key (the device's erasure).
    func deleteAttestation(of device: DeviceKey) async throws
}
