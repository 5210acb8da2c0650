/// The authenticator data App Attest signs (WebAuthn's layout): the App ID's hash, flags, a counter, and in an
/// attestation the key's credential.
public struct AuthenticatorData: Sendable, Hashable {
    /// SHA-256 of the App ID (`TEAMID.bundleId`).
    public var rpIdHash: [UInt8]
    public var flags: UInt8
    /// Big-endian on the wire; 0 in an attestation, then one more for each assertion the key signs.
    public var counter: UInt32
    /// `appattest` + seven zero bytes (production) or `appattestdevelop`; only in an attestation.
    public var aaguid: [UInt8]?
    /// The key identifier (SHA-256 of the public key); only in an attestation.
    public var credentialId: [UInt8]?

    /// Reads the layout: 32 + 1 + 4 bytes, then, when the attested-credential flag (0x40) is set, the aaguid (16),
    /// the credential id's length (2) and the credential id. What follows (the COSE key) is not needed: the key
    /// comes from the certificate.
    public init(_ bytes: [UInt8]) throws(AppAttestFailure) {
        guard bytes.count >= 37 else { throw .malformed("the authenticator data is shorter than 37 bytes") }
        rpIdHash = Array(bytes[0..<32])
        flags = bytes[32]
        counter = bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        guard flags & 0x40 != 0 else {
            aaguid = nil
            credentialId = nil
            return
        }
        guard bytes.count >= 55 else { throw .malformed("the authenticator data has no attested credential") }
        aaguid = Array(bytes[37..<53])
        let length = Int(bytes[53]) << 8 | Int(bytes[54])
        guard bytes.count >= 55 + length else { throw .malformed("the credential id runs past the authenticator data") }
        credentialId = Array(bytes[55..<(55 + length)])
    }

    /// The layout written back, for tests and the device's software signer.
    public var bytes: [UInt8] {
        var out = rpIdHash + [flags] + (0..<4).reversed().map { UInt8(truncatingIfNeeded: counter >> ($0 * 8)) }
        if let aaguid, let credentialId {
            out += aaguid + [UInt8(credentialId.count >> 8), UInt8(truncatingIfNeeded: credentialId.count)] + credentialId
        }
        return out
    }

    /// Creates authenticator data from its parts.
    public init(rpIdHash: [UInt8], flags: UInt8, counter: UInt32, aaguid: [UInt8]? = nil, credentialId: [UInt8]? = nil) {
        self.rpIdHash = rpIdHash
        self.flags = flags
        self.counter = counter
        self.aaguid = aaguid
        self.credentialId = credentialId
    }
}

/// Apple's App Attest environments, told apart by the aaguid.
public enum AppAttestEnvironment: String, Sendable, Hashable, CaseIterable, Codable {
    case production
    case development

    /// The 16 bytes of the aaguid that names this environment.
    public var aaguid: [UInt8] {
        switch self {
        case .production: Array("appattest".utf8) + Array(repeating: 0, count: 7)
        case .development: Array("appattestdevelop".utf8)
        }
    }

    /// The environment an aaguid names; `nil` for anything else.
    public init?(aaguid: [UInt8]) {
        guard let match = Self.allCases.first(where: { $0.aaguid == aaguid }) else { return nil }
        self = match
    }
}
