/// Why an attestation or an assertion was refused: one case for each of Apple's verification steps, so that the
/// answer (and the log) says which step failed. The HTTP layer maps each to a problem type.
public enum AppAttestFailure: Error, Sendable, Hashable {
    /// The CBOR, its structure, the authenticator data or a certificate could not be read.
    case malformed(String)
    /// The `x5c` chain does not lead to the App Attestation root at the time of verification.
    case certificateChain(String)
    /// The credential certificate's nonce is not SHA-256(authData ‖ SHA-256(challenge)).
    case nonce
    /// The key id sent, SHA-256 of the certificate's public key and the credential id are not all the same.
    case keyId
    /// The authenticator data was made for another App ID.
    case appId
    /// An attestation's counter is not 0.
    case counter
    /// The aaguid names no environment, or development where only production is accepted.
    case environment(String)
    /// The challenge is unknown, expired or already used.
    case challenge(String)
    /// An assertion could not be read.
    case assertionMalformed(String)
    /// An assertion's signature does not verify with the device's key.
    case signature
    /// An assertion's counter is not above the last one accepted: a replay.
    case replayed
    /// No attested key has this id (for this device of this app).
    case unknownKey
    /// The app requires attestation and the request carries no assertion.
    case required
    /// The service could not verify in time (too many attestations at once); nothing was decided.
    case busy
}

extension AppAttestFailure {
    /// The problem type's last part (`urn:synchealth:problem:<slug>`): one for each step, the same in the API's
    /// answers, the metrics and `synchealth app-attest verify`.
    public var slug: String {
        switch self {
        case .malformed: "attestation-malformed"
        case .certificateChain: "attestation-chain"
        case .nonce: "attestation-nonce"
        case .keyId: "attestation-key-id"
        case .appId: "attestation-app-id"
        case .counter: "attestation-counter"
        case .environment: "attestation-environment"
        case .challenge: "attestation-challenge"
        case .assertionMalformed: "assertion-malformed"
        case .signature: "assertion-signature"
        case .replayed: "assertion-replayed"
        case .unknownKey: "assertion-unknown-key"
        case .required: "attestation-required"
        case .busy: "attestation-busy"
        }
    }

    /// What the step found, where it says more than its slug.
    public var detail: String? {
        switch self {
        case .malformed(let why), .certificateChain(let why), .environment(let why), .challenge(let why), .assertionMalformed(let why): why
        default: nil
        }
    }
}
