public import Foundation

/// Apple's App Attest as the reporter uses it: a key in the Secure Enclave, attested once by Apple for this app, that
/// signs every upload. `DCAppAttestService` on Apple platforms; tests and other platforms supply their own.
///
/// Each method takes the client data itself, not its hash: the provider hashes it (SHA-256) as App Attest expects,
/// so that the reporter needs no cryptography of its own.
public protocol AppAttestProvider: Sendable {
    /// Whether this device can attest (`false` on simulators, some Macs, and in some extensions).
    var isSupported: Bool { get }
    /// Makes a new key and returns its id.
    func generateKey() async throws -> String
    /// Has Apple attest the key for `clientData` (the server's challenge); returns the attestation object.
    func attestKey(_ keyId: String, clientData: Data) async throws -> Data
    /// Signs `clientData` (an upload's body, exactly as sent) with the key; returns the assertion.
    func generateAssertion(_ keyId: String, clientData: Data) async throws -> Data
}

/// What a provider throws for a key the platform no longer knows (`DCError.invalidKey`: a reinstall, a restore from a
/// backup): the reporter makes a new key and attests it.
public struct AppAttestInvalidKey: Error, Sendable, Equatable {
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

/// The device's App Attest key id and whether the server accepted its attestation. Kept beside the device id in the
/// reporter's directory: both live and die together (the directory is excluded from backups and goes with the app),
/// as an App Attest key does. The Keychain would outlive a reinstall, which the key does not.
struct AttestedKeyRecord: Codable, Equatable {
    var keyId: String
    var attested: Bool

    static let fileName = "app-attest-key.json"

    static func load(in directory: URL) -> AttestedKeyRecord? {
        guard let data = try? Data(contentsOf: directory.appendingPathComponent(fileName)) else { return nil }
        return try? JSONDecoder().decode(AttestedKeyRecord.self, from: data)
    }

    func save(in directory: URL) throws {
        try JSONEncoder().encode(self).write(to: directory.appendingPathComponent(Self.fileName), options: .atomic)
    }

    static func remove(in directory: URL) {
        try? FileManager.default.removeItem(at: directory.appendingPathComponent(fileName))
    }
}
