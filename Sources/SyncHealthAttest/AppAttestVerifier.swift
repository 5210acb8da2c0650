import Crypto
public import Foundation
import SwiftASN1
@_spi(FixedExpiryValidationTime) public import X509

/// A device's App Attest key as the service keeps it after verifying its attestation.
public struct AttestedKey: Sendable, Hashable {
    /// SHA-256 of the public key: the id the device names the key by.
    public var keyId: [UInt8]
    /// The P-256 public key, X9.62 uncompressed (65 bytes).
    public var publicKey: [UInt8]
    public var environment: AppAttestEnvironment
    /// Apple's receipt (PKCS #7), kept for asking Apple for the device's fraud-risk metric later.
    public var receipt: [UInt8]

    /// Creates a key record.
    public init(keyId: [UInt8], publicKey: [UInt8], environment: AppAttestEnvironment, receipt: [UInt8]) {
        self.keyId = keyId
        self.publicKey = publicKey
        self.environment = environment
        self.receipt = receipt
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

    /// Verifies an attestation object made for `challenge` by the key `keyId`, for `app`, at `now`; returns the key
    /// to keep. Every step of Apple's list, in its order, each failing with its own case.
    public func verifyAttestation(
        _ object: [UInt8],
        keyId: [UInt8],
        challenge: [UInt8],
        app: AppAttestApp,
        environments: Set<AppAttestEnvironment>,
        now: Date
    ) async throws(AppAttestFailure) -> AttestedKey {
        let parsed: CBORValue
        do { parsed = try CBORValue.decode(object) } catch { throw .malformed("the attestation is not CBOR: \(error)") }
        guard parsed["fmt"] == .text("apple-appattest") else { throw .malformed("fmt is not apple-appattest") }
        guard let statement = parsed["attStmt"], case .array(let chain)? = statement["x5c"], !chain.isEmpty,
            let authBytes = parsed["authData"]?.byteString
        else { throw .malformed("the attestation lacks attStmt.x5c or authData") }
        let receipt = statement["receipt"]?.byteString ?? []

        // 1. The chain, from the credential certificate, to the root at `now`.
        var certificates: [Certificate] = []
        for item in chain {
            guard let der = item.byteString, let certificate = try? Certificate(derEncoded: der) else {
                throw .malformed("an x5c entry is not a DER certificate")
            }
            certificates.append(certificate)
        }
        let credential = certificates[0]
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) { RFC5280Policy(fixedExpiryValidationTime: now) }
        switch await verifier.validate(leaf: credential, intermediates: CertificateStore(certificates.dropFirst())) {
        case .validCertificate: break
        case .couldNotValidate(let failures):
            throw .certificateChain(failures.first.map { "\($0.policyFailureReason)" } ?? "no chain to the App Attestation root")
        }

        // 2-4. clientDataHash = SHA-256(challenge); nonce = SHA-256(authData ‖ clientDataHash) = the certificate's.
        let clientDataHash = Array(SHA256.hash(data: challenge))
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
        let auth = try AuthenticatorData(authBytes)
        guard auth.rpIdHash == app.rpIdHash else { throw .appId }
        guard auth.counter == 0 else { throw .counter }
        guard let aaguid = auth.aaguid, let environment = AppAttestEnvironment(aaguid: aaguid) else {
            throw .environment("the aaguid names no App Attest environment")
        }
        guard environments.contains(environment) else { throw .environment("\(environment.rawValue) keys are not accepted") }
        guard auth.credentialId == keyId else { throw .keyId }
        return AttestedKey(keyId: keyId, publicKey: x963, environment: environment, receipt: receipt)
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

    /// Verifies an assertion over `clientData` (the bytes the request carried) with the device's stored key;
    /// returns the assertion's counter, which must be above `lastCounter`. The caller keeps the new counter.
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
        do { auth = try AuthenticatorData(authBytes) } catch { throw .assertionMalformed("the authenticator data is shorter than 37 bytes") }
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
