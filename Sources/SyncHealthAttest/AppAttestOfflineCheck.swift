public import Foundation

/// `synchealth app-attest verify`: Apple's steps on one attestation (and optionally one assertion with the key it
/// carries), offline, for an operator looking at an attestation the service refused, and for tests. Pure: every
/// input, the time included, is given.
public struct AppAttestOfflineCheck: Sendable {
    /// `TEAMID.bundleId`.
    public var appIdentifier: String
    public var keyId: [UInt8]
    /// The attestation object's CBOR.
    public var attestation: [UInt8]
    /// Exactly the bytes the app passed to `attestKey`.
    public var clientDataHash: [UInt8]
    public var at: Date
    public var verifier: AppAttestVerifier
    public var allowsDevelopment: Bool
    /// An assertion's CBOR, with the exact bytes the app signed and the counter accepted before it.
    public var assertion: (object: [UInt8], clientData: [UInt8], previousCounter: UInt32)?

    /// Creates a check of the inputs given.
    public init(
        appIdentifier: String,
        keyId: [UInt8],
        attestation: [UInt8],
        clientDataHash: [UInt8],
        at: Date,
        verifier: AppAttestVerifier,
        allowsDevelopment: Bool,
        assertion: (object: [UInt8], clientData: [UInt8], previousCounter: UInt32)? = nil
    ) {
        self.appIdentifier = appIdentifier
        self.keyId = keyId
        self.attestation = attestation
        self.clientDataHash = clientDataHash
        self.at = at
        self.verifier = verifier
        self.allowsDevelopment = allowsDevelopment
        self.assertion = assertion
    }

    /// What the check found: the command prints it as one JSON object.
    public struct Report: Sendable, Hashable, Encodable {
        /// `valid` or `refused`.
        public var result: String
        /// The problem's slug, as the API names it; `nil` when valid.
        public var type: String?
        public var detail: String?
        public var environment: String?
        /// Base64, as the API carries it.
        public var keyId: String
        /// The assertion's counter, where one was checked and verified.
        public var counter: UInt32?
        public var validationCategory: UInt32?
        public var bundleVersion: String?

        /// Whether everything checked verified.
        public var isValid: Bool { result == "valid" }
    }

    /// Runs the steps: the attestation, then the assertion with the key it gave.
    public func run() -> Report {
        var report = Report(result: "refused", keyId: Data(keyId).base64EncodedString())
        let app = AppAttestApp(appId: appIdentifier, appIdentifier: appIdentifier, mode: .require)
        do {
            let key = try verifier.verifyAttestation(
                attestation,
                keyId: keyId,
                clientDataHash: clientDataHash,
                app: app,
                environments: allowsDevelopment ? [.production, .development] : [.production],
                now: at
            )
            report.environment = key.environment.rawValue
            report.validationCategory = key.validationCategory
            report.bundleVersion = key.bundleVersion
            if let assertion {
                report.counter = try AppAttestVerifier.verifyAssertion(
                    assertion.object,
                    clientData: assertion.clientData,
                    publicKey: key.publicKey,
                    lastCounter: assertion.previousCounter,
                    app: app
                )
            }
            report.result = "valid"
        } catch {
            report.type = error.slug
            report.detail = error.detail
        }
        return report
    }
}
