public import Crypto
public import Foundation
import SwiftASN1
public import SyncHealthAttest
public import X509

/// A stand-in for Apple's App Attest: a root and an intermediate of its own, and software keys that attest and assert
/// exactly as a device's Secure Enclave key does. A service given `rootPEM` as `SYNCHEALTH_APP_ATTEST_ROOT` accepts
/// what it makes, so the whole protocol runs where no Apple device is.
public struct StandInAppAttest: Sendable {
    public let rootKey: P256.Signing.PrivateKey
    public let root: Certificate
    public let intermediateKey: P256.Signing.PrivateKey
    public let intermediate: Certificate
    /// When the certificates are valid: from an hour before `now` to a year after.
    public let now: Date

    /// A new stand-in PKI.
    public init(now: Date = Date()) throws {
        self.now = now
        rootKey = P256.Signing.PrivateKey()
        let rootName = try DistinguishedName { CommonName("Stand-in App Attestation Root CA") }
        root = try Self.certificate(
            key: rootKey.publicKey,
            subject: rootName,
            issuer: rootName,
            issuerKey: rootKey,
            now: now,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true))
            }
        )
        intermediateKey = P256.Signing.PrivateKey()
        intermediate = try Self.certificate(
            key: intermediateKey.publicKey,
            subject: try DistinguishedName { CommonName("Stand-in App Attestation CA 1") },
            issuer: rootName,
            issuerKey: rootKey,
            now: now,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
            }
        )
    }

    /// The root, as `SYNCHEALTH_APP_ATTEST_ROOT` reads it.
    public func rootPEM() throws -> String { try root.serializeAsPEM().pemString }

    /// A verifier trusting this stand-in's root.
    public var verifier: AppAttestVerifier { AppAttestVerifier(roots: [root]) }

    static func certificate(
        key: P256.Signing.PublicKey,
        subject: DistinguishedName,
        issuer: DistinguishedName,
        issuerKey: P256.Signing.PrivateKey,
        now: Date,
        notAfter: TimeInterval = 365 * 86_400,
        extensions: Certificate.Extensions
    ) throws -> Certificate {
        try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(key),
            notValidBefore: now - 3600,
            notValidAfter: now + notAfter,
            issuer: issuer,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: Certificate.PrivateKey(issuerKey)
        )
    }

    /// The credential certificate's nonce extension: `SEQUENCE { [1] EXPLICIT OCTET STRING nonce }`.
    static func nonceExtension(_ nonce: [UInt8]) -> Certificate.Extension {
        let octets: [UInt8] = [0x04, UInt8(nonce.count)] + nonce
        let tagged: [UInt8] = [0xA1, UInt8(octets.count)] + octets
        let sequence: [UInt8] = [0x30, UInt8(tagged.count)] + tagged
        return Certificate.Extension(oid: [1, 2, 840, 113_635, 100, 8, 2], critical: false, value: sequence[...])
    }
}

extension StandInAppAttest {
    /// The red team's x5c: `count` certificates with one subject (Apple's intermediate's name) and one key, each
    /// with a different SAN, so that every one issues every other. Handed to a path builder as intermediates it makes
    /// it try about e·count! partial paths; appended to an attestation's x5c it must cost nothing.
    public static func loopingCertificates(_ count: Int, now: Date = Date()) throws -> [[UInt8]] {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName("Apple App Attestation CA 1") }
        return try (0..<count).map { index in
            let certificate = try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(),
                publicKey: Certificate.PublicKey(key.publicKey),
                notValidBefore: now - 3600,
                notValidAfter: now + 86_400,
                issuer: name,
                subject: name,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                    SubjectAlternativeNames([.dnsName("\(index).loop.example")])
                },
                issuerPrivateKey: Certificate.PrivateKey(key)
            )
            return try StandInAppAttestKey.der(certificate)
        }
    }
}

/// One app install's App Attest key, in software: what `DCAppAttestService` does on a device.
public struct StandInAppAttestKey: Sendable {
    public let privateKey: P256.Signing.PrivateKey
    public let pki: StandInAppAttest
    /// `TEAMID.bundleId` the key was made for.
    public let appIdentifier: String
    public let environment: AppAttestEnvironment
    /// The counter of the last assertion signed.
    public private(set) var counter: UInt32 = 0

    /// A new key for an app.
    public init(pki: StandInAppAttest, appIdentifier: String, environment: AppAttestEnvironment = .production) {
        privateKey = P256.Signing.PrivateKey()
        self.pki = pki
        self.appIdentifier = appIdentifier
        self.environment = environment
    }

    /// SHA-256 of the public key: the key's id.
    public var keyId: [UInt8] { Array(SHA256.hash(data: privateKey.publicKey.x963Representation)) }

    /// What goes into an attestation; a test changes one part to make the tampered object each verification step
    /// must refuse.
    public struct AttestationParts: Sendable {
        public var authenticatorData: AuthenticatorData
        /// `nil`: SHA-256(authData ‖ clientDataHash), as Apple writes it.
        public var nonce: [UInt8]?
        public var fmt = "apple-appattest"
        /// The key the credential certificate names (the device's own unless changed).
        public var certifiedKey: P256.Signing.PublicKey
        /// Signs the credential certificate (the intermediate's key unless changed).
        public var issuerKey: P256.Signing.PrivateKey
        /// Whether the intermediate goes into x5c.
        public var includeIntermediate = true
        /// DER certificates appended to x5c after the intermediate.
        public var extraCertificates: [[UInt8]] = []
        /// Seconds the credential certificate stays valid.
        public var validFor: TimeInterval = 3 * 86_400
    }

    /// The parts of an honest attestation, in the layout devices write: flags 0x40, the credential, the COSE key,
    /// and, as iOS 27 writes it, `extensions` after the key (the ED bit 0x80 set only where `extendedFlag` says).
    public func parts(extensions: [UInt8]? = nil, extendedFlag: Bool = false) -> AttestationParts {
        AttestationParts(
            authenticatorData: AuthenticatorData(
                rpIdHash: Array(SHA256.hash(data: Array(appIdentifier.utf8))),
                flags: extendedFlag ? 0xC0 : 0x40,
                counter: 0,
                aaguid: environment.aaguid,
                credentialId: keyId,
                credentialPublicKey: AuthenticatorData.coseKey(x963: Array(privateKey.publicKey.x963Representation)),
                extensions: extensions
            ),
            certifiedKey: privateKey.publicKey,
            issuerKey: pki.intermediateKey
        )
    }

    /// The attestation object (CBOR) for a challenge, as `attestKey(_:clientDataHash:)` returns it.
    public func attestation(challenge: [UInt8], parts: AttestationParts? = nil) throws -> [UInt8] {
        let parts = parts ?? self.parts()
        let authData = parts.authenticatorData.bytes
        let clientDataHash = Array(SHA256.hash(data: challenge))
        let nonce = parts.nonce ?? Array(SHA256.hash(data: authData + clientDataHash))
        let credential = try StandInAppAttest.certificate(
            key: parts.certifiedKey,
            subject: try DistinguishedName { CommonName(keyId.map { String(format: "%02x", $0) }.joined()) },
            issuer: pki.intermediate.subject,
            issuerKey: parts.issuerKey,
            now: pki.now,
            notAfter: parts.validFor,
            extensions: try Certificate.Extensions {
                // As Apple writes a credential certificate: not a CA, a signing key, then the nonce.
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true, nonRepudiation: true, keyEncipherment: true, dataEncipherment: true))
                StandInAppAttest.nonceExtension(nonce)
            }
        )
        var chain: [CBORValue] = [.bytes(try Self.der(credential))]
        if parts.includeIntermediate { chain.append(.bytes(try Self.der(pki.intermediate))) }
        chain += parts.extraCertificates.map { .bytes($0) }
        return CBORValue.map([
            (.text("fmt"), .text(parts.fmt)),
            (.text("attStmt"), .map([(.text("x5c"), .array(chain)), (.text("receipt"), .bytes(Array("stand-in receipt".utf8)))])),
            (.text("authData"), .bytes(authData)),
        ])
        .encoded()
    }

    /// An assertion over `clientData`, with the next counter, as `generateAssertion(_:clientDataHash:)` returns it.
    public mutating func assertion(clientData: some Sequence<UInt8>) throws -> [UInt8] {
        counter += 1
        return try assertion(clientData: clientData, counter: counter)
    }

    /// An assertion with a counter of the caller's choice (for replays and going backwards), in the layout devices
    /// write: 37 bytes with flags 0x40 and no credential after them, then `extensions` where given.
    public func assertion(
        clientData: some Sequence<UInt8>,
        counter: UInt32,
        appIdentifier: String? = nil,
        extensions: [UInt8]? = nil
    ) throws -> [UInt8] {
        let auth = AuthenticatorData(
            rpIdHash: Array(SHA256.hash(data: Array((appIdentifier ?? self.appIdentifier).utf8))),
            flags: 0x40,
            counter: counter,
            extensions: extensions
        ).bytes
        let nonce = Array(SHA256.hash(data: auth + Array(SHA256.hash(data: Array(clientData)))))
        let signature = try privateKey.signature(for: nonce)
        return CBORValue.map([(.text("signature"), .bytes(Array(signature.derRepresentation))), (.text("authenticatorData"), .bytes(auth))])
            .encoded()
    }

    /// A certificate's DER.
    public static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }
}
