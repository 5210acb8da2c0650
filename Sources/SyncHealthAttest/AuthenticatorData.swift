/// The authenticator data App Attest signs, in the layouts real devices write (not WebAuthn's reading of the flags):
///
/// - an **assertion**'s is 37 bytes (the App ID's hash, flags, a counter), whatever its flags say: devices set 0x40
///   ("attested credential data") with no credential after it. It may be followed by one CBOR map of extensions.
/// - an **attestation**'s is those 37 bytes, the aaguid (16), the credential id's length (2), the credential id, the
///   COSE key (a CBOR map), and, on iOS 27 and later, a CBOR map of extensions, with or without the ED flag (0x80).
///
/// The extensions Apple writes are read where present and never required: `apple_validation_category_01` (4 bytes,
/// little-endian: how the app was signed) and `apple_bundle_version_01` (text).
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
    /// The COSE key's CBOR, exactly as written; only in an attestation. The key the service keeps comes from the
    /// certificate, which the chain vouches for.
    public var credentialPublicKey: [UInt8]?
    /// The extensions map's CBOR, exactly as written; `nil` where the device wrote none.
    public var extensions: [UInt8]?

    /// The largest extensions map read: Apple's is about 60 bytes.
    public static let maximumExtensionsSize = 1024
    /// The deepest nesting read in the COSE key and the extensions: both are flat maps.
    public static let maximumMapDepth = 4
    /// The largest COSE key read: a P-256 key is 77 bytes.
    public static let maximumKeySize = 512

    /// Reads an assertion's authenticator data: 37 bytes, then at most one CBOR map.
    public init(assertion bytes: [UInt8]) throws(AppAttestFailure) {
        guard bytes.count >= 37 else {
            throw .malformed("the authenticator data is \(bytes.count) bytes; an assertion's is at least 37")
        }
        rpIdHash = Array(bytes[0..<32])
        flags = bytes[32]
        counter = bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        aaguid = nil
        credentialId = nil
        credentialPublicKey = nil
        extensions = try Self.extensions(bytes[37...])
    }

    /// Reads an attestation's authenticator data: 37 bytes, the attested credential, the COSE key, then at most one
    /// CBOR map of extensions.
    public init(attestation bytes: [UInt8]) throws(AppAttestFailure) {
        guard bytes.count >= 55 else {
            throw .malformed("the authenticator data is \(bytes.count) bytes; an attestation's holds at least 55 before its key")
        }
        rpIdHash = Array(bytes[0..<32])
        flags = bytes[32]
        counter = bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        aaguid = Array(bytes[37..<53])
        let length = Int(bytes[53]) << 8 | Int(bytes[54])
        guard bytes.count >= 55 + length else { throw .malformed("the credential id runs past the authenticator data") }
        credentialId = Array(bytes[55..<(55 + length)])
        let rest = bytes[(55 + length)...]
        guard !rest.isEmpty else { throw .malformed("the authenticator data has no credential public key after the credential id") }
        let key: (value: CBORValue, length: Int)
        do {
            key = try CBORValue.decodePrefix(rest.prefix(Self.maximumKeySize), maximumDepth: Self.maximumMapDepth)
        } catch {
            throw .malformed("the credential public key is not a CBOR map of at most \(Self.maximumKeySize) bytes: \(error)")
        }
        guard case .map = key.value else { throw .malformed("the credential public key is not a CBOR map") }
        credentialPublicKey = Array(rest.prefix(key.length))
        extensions = try Self.extensions(rest.dropFirst(key.length))
    }

    /// What follows the fixed part: nothing, or exactly one well-formed CBOR map, bounded in size and depth.
    private static func extensions(_ rest: ArraySlice<UInt8>) throws(AppAttestFailure) -> [UInt8]? {
        guard !rest.isEmpty else { return nil }
        guard rest.count <= maximumExtensionsSize else {
            throw .malformed("\(rest.count) bytes follow the authenticator data; an extensions map is at most \(maximumExtensionsSize)")
        }
        let value: CBORValue
        do {
            value = try CBORValue.decode(rest, maximumDepth: maximumMapDepth)
        } catch {
            throw .malformed("what follows the authenticator data is not one CBOR map: \(error)")
        }
        guard case .map = value else { throw .malformed("what follows the authenticator data is not a CBOR map") }
        let extensions = Array(rest)
        _ = try Self.appleExtensions(extensions)
        return extensions
    }

    /// `apple_validation_category_01`: how the app was signed (App Store, TestFlight, development, enterprise, …);
    /// `nil` where the device wrote none (before iOS 27).
    public var validationCategory: UInt32? { (try? Self.appleExtensions(extensions ?? []))?.category }

    /// `apple_bundle_version_01`: the app's bundle version; `nil` where the device wrote none.
    public var bundleVersion: String? { (try? Self.appleExtensions(extensions ?? []))?.version }

    /// Apple's two extensions, checked for their types where present.
    static func appleExtensions(_ bytes: [UInt8]) throws(AppAttestFailure) -> (category: UInt32?, version: String?) {
        guard !bytes.isEmpty, let map = try? CBORValue.decode(bytes, maximumDepth: maximumMapDepth) else { return (nil, nil) }
        var category: UInt32?
        var version: String?
        if let value = map["apple_validation_category_01"] {
            guard let raw = value.byteString, raw.count == 4 else {
                throw .malformed("apple_validation_category_01 is not 4 bytes")
            }
            category = raw.reversed().reduce(0) { $0 << 8 | UInt32($1) }
        }
        if let value = map["apple_bundle_version_01"] {
            guard case .text(let text) = value else { throw .malformed("apple_bundle_version_01 is not text") }
            version = text
        }
        return (category, version)
    }

    /// The layout written back, for tests and the device's software signer: an attestation's when it has a
    /// credential, an assertion's otherwise.
    public var bytes: [UInt8] {
        var out = rpIdHash + [flags] + (0..<4).reversed().map { UInt8(truncatingIfNeeded: counter >> ($0 * 8)) }
        if let aaguid, let credentialId {
            out += aaguid + [UInt8(credentialId.count >> 8), UInt8(truncatingIfNeeded: credentialId.count)] + credentialId
            out += credentialPublicKey ?? []
        }
        out += extensions ?? []
        return out
    }

    /// Creates authenticator data from its parts.
    public init(
        rpIdHash: [UInt8],
        flags: UInt8,
        counter: UInt32,
        aaguid: [UInt8]? = nil,
        credentialId: [UInt8]? = nil,
        credentialPublicKey: [UInt8]? = nil,
        extensions: [UInt8]? = nil
    ) {
        self.rpIdHash = rpIdHash
        self.flags = flags
        self.counter = counter
        self.aaguid = aaguid
        self.credentialId = credentialId
        self.credentialPublicKey = credentialPublicKey
        self.extensions = extensions
    }

    /// The COSE key (RFC 9053, EC2 on P-256 for ES256) of a 65-byte X9.62 uncompressed point, in the order and form
    /// devices write it: `{1: 2, 3: -7, -1: 1, -2: x, -3: y}`.
    public static func coseKey(x963 point: [UInt8]) -> [UInt8] {
        CBORValue.map([
            (.unsigned(1), .unsigned(2)),
            (.unsigned(3), .negative(6)),
            (.negative(0), .unsigned(1)),
            (.negative(1), .bytes(Array(point.dropFirst().prefix(32)))),
            (.negative(2), .bytes(Array(point.dropFirst(33).prefix(32)))),
        ])
        .encoded()
    }

    /// Apple's extensions map as iOS 27 writes it, for the stand-in.
    public static func appleExtensions(validationCategory: UInt32, bundleVersion: String) -> [UInt8] {
        CBORValue.map([
            (.text("apple_bundle_version_01"), .text(bundleVersion)),
            (.text("apple_validation_category_01"), .bytes((0..<4).map { UInt8(truncatingIfNeeded: validationCategory >> ($0 * 8)) })),
        ])
        .encoded()
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
