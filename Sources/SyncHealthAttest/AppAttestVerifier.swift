import Crypto
public import Foundation
import SwiftASN1
public import X509

/// A device's App Attest key as the service keeps it after verifying its attestation.
public struct AttestedKey: Sendable, Hashable {
    /// SHA-256 of the public key: the id the device names the key by.
    public var keyId: [UInt8]
    /// The P-256 public key, X9.62 uncompressed (65 bytes).
    public var publicKey: [UInt8]
    public var environment: AppAttestEnvironment
    /// Apple's receipt (PKCS #7), kept for asking Apple for the device's fraud-risk metric later.
    public var receipt: [UInt8]
    /// `apple_validation_category_01` where the device wrote it (iOS 27 and later): how the app was signed.
    public var validationCategory: UInt32?
    /// `apple_bundle_version_01` where the device wrote it.
    public var bundleVersion: String?

    /// Creates a key record.
    public init(
        keyId: [UInt8],
        publicKey: [UInt8],
        environment: AppAttestEnvironment,
        receipt: [UInt8],
        validationCategory: UInt32? = nil,
        bundleVersion: String? = nil
    ) {
        self.keyId = keyId
        self.publicKey = publicKey
        self.environment = environment
        self.receipt = receipt
        self.validationCategory = validationCategory
        self.bundleVersion = bundleVersion
    }
}

/// Apple's verification of App Attest attestations and assertions ("Validating apps that connect to your server"),
/// step by step. Pure: the time comes from the caller, the roots from the configuration, and nothing is stored; the
/// caller keeps the challenge and the counter.
public struct AppAttestVerifier: Sendable {
    /// The roots a credential certificate must chain to: Apple's App Attestation root unless replaced.
    public let roots: [Certificate]

    /// OID 1.2.840.113635.100.8.2: the credential certificate's nonce.
    static let nonceExtension: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 8, 2]

    /// A verifier trusting the roots given.
    public init(roots: [Certificate]) {
        self.roots = roots
    }

    /// A verifier trusting Apple's App Attestation root.
    public static func apple() throws -> AppAttestVerifier {
        AppAttestVerifier(roots: [try Certificate(pemEncoded: AppleAppAttestationRoot.pem)])
    }

    /// A verifier trusting the certificates of a PEM file's text (`SYNCHEALTH_APP_ATTEST_ROOT`).
    public init(pem: String) throws {
        let documents = try PEMDocument.parseMultiple(pemString: pem)
        guard !documents.isEmpty else { throw AppAttestFailure.malformed("the root file holds no certificate") }
        self.init(roots: try documents.map { try Certificate(pemDocument: $0) })
    }

    /// Verifies an attestation object made for `challenge` by the key `keyId`, for `app`, at `now`: the service's own
    /// protocol, in which the app passes SHA-256 of the challenge as `clientDataHash`.
    public func verifyAttestation(
        _ object: [UInt8],
        keyId: [UInt8],
        challenge: [UInt8],
        app: AppAttestApp,
        environments: Set<AppAttestEnvironment>,
        now: Date
    ) throws(AppAttestFailure) -> AttestedKey {
        try verifyAttestation(
            object,
            keyId: keyId,
            clientDataHash: Array(SHA256.hash(data: challenge)),
            app: app,
            environments: environments,
            now: now
        )
    }

    /// Verifies an attestation object that the key `keyId` made over `clientDataHash` (exactly the bytes the app
    /// passed to `attestKey`), for `app`, at `now`; returns the key to keep. Every step of Apple's list, in its
    /// order, each failing with its own case. The work is bounded whatever the input: two certificates, at most one
    /// signature check each per trusted root.
    public func verifyAttestation(
        _ object: [UInt8],
        keyId: [UInt8],
        clientDataHash: [UInt8],
        app: AppAttestApp,
        environments: Set<AppAttestEnvironment>,
        now: Date
    ) throws(AppAttestFailure) -> AttestedKey {
        let parsed: CBORValue
        do { parsed = try CBORValue.decode(object) } catch { throw .malformed("the attestation is not CBOR: \(error)") }
        guard parsed["fmt"] == .text("apple-appattest") else { throw .malformed("fmt is not apple-appattest") }
        guard let statement = parsed["attStmt"], case .array(let chain)? = statement["x5c"],
            let authBytes = parsed["authData"]?.byteString
        else { throw .malformed("the attestation lacks attStmt.x5c or authData") }
        let receipt = statement["receipt"]?.byteString ?? []

        // 1. The chain: Apple's shape and nothing more, the credential certificate then its intermediate, each
        // checked against the next directly. No path search: a chain of other lengths is refused before any
        // signature is checked.
        guard chain.count == 2 else {
            throw .certificateChain("x5c holds \(chain.count) certificates; App Attest sends the credential certificate and one intermediate")
        }
        var certificates: [Certificate] = []
        for item in chain {
            guard let der = item.byteString, let certificate = try? Certificate(derEncoded: der) else {
                throw .malformed("an x5c entry is not a DER certificate")
            }
            certificates.append(certificate)
        }
        let credential = certificates[0]
        try Self.checkChain(credential: credential, intermediate: certificates[1], roots: roots, now: now)

        // 2-4. nonce = SHA-256(authData ‖ clientDataHash) = the certificate's.
        let nonce = Array(SHA256.hash(data: authBytes + clientDataHash))
        guard let stated = try? Self.nonce(in: credential) else { throw .malformed("the credential certificate has no readable nonce") }
        guard stated == nonce else { throw .nonce }

        // 5. SHA-256 of the public key = the key id.
        guard let publicKey = P256.Signing.PublicKey(credential.publicKey) else {
            throw .malformed("the credential certificate's key is not P-256")
        }
        let x963 = Array(publicKey.x963Representation)
        guard Array(SHA256.hash(data: x963)) == keyId else { throw .keyId }

        // 6-9. The App ID, the counter, the environment, the credential id.
        let auth = try AuthenticatorData(attestation: authBytes)
        guard auth.rpIdHash == app.rpIdHash else { throw .appId }
        guard auth.counter == 0 else { throw .counter }
        guard let aaguid = auth.aaguid, let environment = AppAttestEnvironment(aaguid: aaguid) else {
            throw .environment("the aaguid names no App Attest environment")
        }
        guard environments.contains(environment) else { throw .environment("\(environment.rawValue) keys are not accepted") }
        guard auth.credentialId == keyId else { throw .keyId }
        return AttestedKey(
            keyId: keyId,
            publicKey: x963,
            environment: environment,
            receipt: receipt,
            validationCategory: auth.validationCategory,
            bundleVersion: auth.bundleVersion
        )
    }

    /// The credential certificate signed by the intermediate, the intermediate by one of `roots`, each valid at
    /// `now`; the intermediate a CA that may sign certificates, the credential certificate not a CA.
    static func checkChain(credential: Certificate, intermediate: Certificate, roots: [Certificate], now: Date) throws(AppAttestFailure) {
        func valid(_ certificate: Certificate, _ name: String) throws(AppAttestFailure) {
            guard certificate.notValidBefore <= now, now <= certificate.notValidAfter else {
                throw .certificateChain(
                    "the \(name) is not valid at \(now): valid from \(certificate.notValidBefore) to \(certificate.notValidAfter)"
                )
            }
        }
        func known(_ certificate: Certificate, _ name: String) throws(AppAttestFailure) {
            let understood: Set<ASN1ObjectIdentifier> = [.X509ExtensionID.basicConstraints, .X509ExtensionID.keyUsage]
            for ext in certificate.extensions where ext.critical && !understood.contains(ext.oid) {
                throw .certificateChain("the \(name) has a critical extension this service does not understand (\(ext.oid))")
            }
        }
        try valid(credential, "credential certificate")
        try known(credential, "credential certificate")
        if case .isCertificateAuthority? = try? credential.extensions.basicConstraints {
            throw .certificateChain("the credential certificate is a CA")
        }
        guard credential.issuer == intermediate.subject, intermediate.publicKey.isValidSignature(credential.signature, for: credential) else {
            throw .certificateChain("the credential certificate is not signed by the intermediate that follows it in x5c")
        }
        try valid(intermediate, "intermediate certificate")
        try known(intermediate, "intermediate certificate")
        guard case .isCertificateAuthority? = try? intermediate.extensions.basicConstraints else {
            throw .certificateChain("the intermediate certificate is not a CA")
        }
        if let usage = try? intermediate.extensions.keyUsage, !usage.keyCertSign {
            throw .certificateChain("the intermediate certificate may not sign certificates")
        }
        let issuers = roots.filter { $0.subject == intermediate.issuer }
        guard let root = issuers.first(where: { $0.publicKey.isValidSignature(intermediate.signature, for: intermediate) }) else {
            throw .certificateChain("the intermediate certificate is not signed by a trusted App Attestation root")
        }
        try valid(root, "root certificate")
    }

    /// The nonce a credential certificate states: `SEQUENCE { [1] EXPLICIT OCTET STRING }` under the nonce OID.
    public static func nonce(in certificate: Certificate) throws -> [UInt8] {
        guard let ext = certificate.extensions[oid: nonceExtension] else { throw AppAttestFailure.malformed("no nonce extension") }
        let root = try DER.parse(ext.value)
        return try DER.sequence(root, identifier: .sequence) { nodes in
            try DER.explicitlyTagged(&nodes, tagNumber: 1, tagClass: .contextSpecific) { node in
                Array(try ASN1OctetString(derEncoded: node).bytes)
            }
        }
    }

    /// Verifies an assertion over `clientData` (the bytes the request carried, or the bytes the app signed) with the
    /// device's stored key; returns the assertion's counter, which must be above `lastCounter`. The caller keeps the
    /// new counter.
    public static func verifyAssertion(
        _ assertion: [UInt8],
        clientData: some Sequence<UInt8>,
        publicKey: [UInt8],
        lastCounter: UInt32,
        app: AppAttestApp
    ) throws(AppAttestFailure) -> UInt32 {
        let parsed: CBORValue
        do { parsed = try CBORValue.decode(assertion) } catch { throw .assertionMalformed("the assertion is not CBOR: \(error)") }
        guard let signatureBytes = parsed["signature"]?.byteString, let authBytes = parsed["authenticatorData"]?.byteString else {
            throw .assertionMalformed("the assertion lacks signature or authenticatorData")
        }
        let auth: AuthenticatorData
        do {
            auth = try AuthenticatorData(assertion: authBytes)
        } catch {
            guard case .malformed(let why) = error else { throw error }
            throw .assertionMalformed(why)
        }
        guard let key = try? P256.Signing.PublicKey(x963Representation: publicKey) else { throw .unknownKey }
        guard let signature = try? P256.Signing.ECDSASignature(derRepresentation: signatureBytes) else {
            throw .assertionMalformed("the signature is not a DER ECDSA signature")
        }
        var hasher = SHA256()
        hasher.update(data: authBytes)
        hasher.update(data: Array(SHA256.hash(data: Array(clientData))))
        let nonce = Array(hasher.finalize())
        // The device signs the nonce with ECDSA over SHA-256, as its Secure Enclave key signs any data.
        guard key.isValidSignature(signature, for: nonce) else { throw .signature }
        guard auth.rpIdHash == app.rpIdHash else { throw .appId }
        guard auth.counter > lastCounter else { throw .replayed }
        return auth.counter
    }
}
