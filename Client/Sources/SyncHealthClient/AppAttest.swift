public import Foundation

/// Apple's App Attest as the reporter uses it: a key in the Secure Enclave, attested once by Apple for this app, that
/// signs every upload. `DCAppAttestService` on Apple platforms; tests and other platforms supply their own.
///
/// Each method takes the client data itself, not its hash: the provider hashes it (SHA-256) as App Attest expects,
/// so that the reporter needs no cryptography of its own.
public protocol AppAttestProvider: Sendable {
    /// Whether this device can attest (`false` on simulators, on Macs without the Secure Enclave — Intel Macs without a T2 chip —, and in some extensions).
    var isSupported: Bool { get }
    /// Makes a new key and returns its id.
    func generateKey() async throws -> String
    /// Has Apple attest the key for `clientData` (the server's challenge); returns the attestation object.
    func attestKey(_ keyId: String, clientData: Data) async throws -> Data
    /// Signs `clientData` (an upload's body, exactly as sent) with the key; returns the assertion.
    func generateAssertion(_ keyId: String, clientData: Data) async throws -> Data
}

/// What a provider throws for a key the platform no longer knows, or that is attested already (`DCError.invalidKey`:
/// a restore from a backup, a key Apple rejected): the reporter makes a new key and attests it.
public struct AppAttestInvalidKey: Error, Sendable, Equatable {
    /// Creates the error.
    public init() {}
}

/// What a provider throws when Apple's App Attest service could not be reached (`DCError.serverUnavailable`): the
/// reporter tries again later with the same key and the same challenge, as Apple asks.
public struct AppAttestServerUnavailable: Error, Sendable, Equatable {
    /// Creates the error.
    public init() {}
}

/// What a provider throws where App Attest is not available whatever `isSupported` said (`DCError.featureUnsupported`,
/// app extensions): the reporter sends unsigned for the rest of the process.
public struct AppAttestUnsupported: Error, Sendable, Equatable {
    /// Creates the error.
    public init() {}
}

extension SyncHealthReporter {
    /// Whether uploads are signed with App Attest (`SYNCHEALTH_APP_ATTEST` on the server says whether it asks for it).
    public struct AppAttest: Sendable {
        let provider: (any AppAttestProvider)?

        /// Uploads are not signed.
        public static let disabled = AppAttest(provider: nil)

        /// Uploads are signed with `DCAppAttestService` where the device supports it, and sent unsigned where it does not
        /// (the server shows such devices as not attested, or refuses them for an app that requires attestation).
        public static var enabled: AppAttest {
            #if canImport(DeviceCheck) && canImport(CryptoKit)
            AppAttest(provider: DeviceCheckAppAttest())
            #else
            AppAttest(provider: UnsupportedAppAttest())
            #endif
        }

        /// Uploads are signed by `provider` (a stand-in for tests).
        public static func provider(_ provider: any AppAttestProvider) -> AppAttest {
            AppAttest(provider: provider)
        }
    }
}

/// Where App Attest does not exist: never supported.
struct UnsupportedAppAttest: AppAttestProvider {
    var isSupported: Bool { false }
    func generateKey() async throws -> String { throw AppAttestInvalidKey() }
    func attestKey(_ keyId: String, clientData: Data) async throws -> Data { throw AppAttestInvalidKey() }
    func generateAssertion(_ keyId: String, clientData: Data) async throws -> Data { throw AppAttestInvalidKey() }
}

/// The device's App Attest state, kept beside the device id in the reporter's directory: both live and die together
/// (the directory is excluded from backups and goes with the app), as an App Attest key does. The Keychain would
/// outlive a reinstall, which the key does not.
struct AttestedKeyRecord: Codable, Equatable {
    /// The key made with `generateKey`; `nil` when there is none (never made, or discarded).
    var keyId: String?
    /// Whether the server accepted the key's attestation.
    var attested = false
    /// The challenge `attestKey` is called with (base64), kept so that a retry after `serverUnavailable` uses the same
    /// `clientDataHash`, and the time the server said it expires.
    var challenge: String?
    var challengeExpiresAt: Date?
    /// An attestation Apple made that the server has not acknowledged (base64): posted again before anything else,
    /// since `attestKey` cannot be called twice for one key.
    var attestation: String?
    /// The device token and when it expires.
    var token: String?
    var tokenExpiresAt: Date?
    /// When the last key was made, and when the server last refused an attestation: after a refusal, at most one new
    /// key a day (Apple's per-device key counts cannot be reset; a misconfigured server must not burn them).
    var keyMadeAt: Date?
    var refusedAt: Date?

    static let fileName = "app-attest-key.json"

    init() {}

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        keyId = try c.decodeIfPresent(String.self, forKey: .keyId)
        attested = try c.decodeIfPresent(Bool.self, forKey: .attested) ?? false
        challenge = try c.decodeIfPresent(String.self, forKey: .challenge)
        challengeExpiresAt = try c.decodeIfPresent(Date.self, forKey: .challengeExpiresAt)
        attestation = try c.decodeIfPresent(String.self, forKey: .attestation)
        token = try c.decodeIfPresent(String.self, forKey: .token)
        tokenExpiresAt = try c.decodeIfPresent(Date.self, forKey: .tokenExpiresAt)
        keyMadeAt = try c.decodeIfPresent(Date.self, forKey: .keyMadeAt)
        refusedAt = try c.decodeIfPresent(Date.self, forKey: .refusedAt)
    }

    /// The record on disk; an empty one when there is none (or what is there is not a record). A file that cannot
    /// be read throws: a new key in its place would give up the attested one.
    static func load(in directory: URL) throws -> AttestedKeyRecord {
        guard let data = try StorageFiles.readIfPresent(directory.appendingPathComponent(fileName)) else { return AttestedKeyRecord() }
        return (try? JSONDecoder().decode(AttestedKeyRecord.self, from: data)) ?? AttestedKeyRecord()
    }

    func save(in directory: URL) throws {
        try StorageFiles.write(JSONEncoder().encode(self), to: directory.appendingPathComponent(Self.fileName))
    }

    /// Forgets the key and everything made with it; the budget (when keys were made and refused) stays.
    mutating func discardKey() {
        keyId = nil
        attested = false
        challenge = nil
        challengeExpiresAt = nil
        attestation = nil
        token = nil
        tokenExpiresAt = nil
    }

    /// Whether a new key may be made at `now`: always before any refusal; after one, not in the process that saw it
    /// (`refusedThisLaunch`) and at most one a day.
    func mayMakeKey(now: Date, refusedThisLaunch: Bool) -> Bool {
        guard refusedAt != nil else { return true }
        guard !refusedThisLaunch else { return false }
        return keyMadeAt.map { now.timeIntervalSince($0) >= 86_400 } ?? true
    }

    /// The token, if it stays valid for `margin` more.
    func validToken(now: Date, margin: TimeInterval = 300) -> String? {
        guard let token, let tokenExpiresAt, tokenExpiresAt.timeIntervalSince(now) > margin else { return nil }
        return token
    }
}
