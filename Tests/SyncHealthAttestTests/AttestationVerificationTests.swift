import Crypto
import Foundation
import SyncHealthAttest
import SyncHealthAttestTesting
import Testing
import X509

@Suite("App Attest: each of Apple's attestation steps refuses its own tampering")
struct AttestationVerificationTests {
    static let app = AppAttestApp(appId: "com.example.notes", appIdentifier: "ABCDE12345.com.example.notes", mode: .require)
    let pki: StandInAppAttest
    let device: StandInAppAttestKey
    let challenge = Array((0..<32).map { UInt8($0) })

    init() throws {
        pki = try StandInAppAttest()
        device = StandInAppAttestKey(pki: pki, appIdentifier: Self.app.appIdentifier)
    }

    func verify(
        _ object: [UInt8],
        keyId: [UInt8]? = nil,
        challenge: [UInt8]? = nil,
        environments: Set<AppAttestEnvironment> = [.production],
        at now: Date? = nil
    ) throws(AppAttestFailure) -> AttestedKey {
        try pki.verifier.verifyAttestation(
            object,
            keyId: keyId ?? device.keyId,
            challenge: challenge ?? self.challenge,
            app: Self.app,
            environments: environments,
            now: now ?? pki.now
        )
    }

    func failure(_ body: () throws(AppAttestFailure) -> AttestedKey) -> AppAttestFailure? {
        do {
            _ = try body()
            return nil
        } catch {
            return error
        }
    }

    @Test("an honest attestation gives the device's key, its environment and the receipt")
    func honest() async throws {
        let key = try verify(try device.attestation(challenge: challenge))
        #expect(key.keyId == device.keyId)
        #expect(key.publicKey == Array(device.privateKey.publicKey.x963Representation))
        #expect(key.environment == .production)
        #expect(key.receipt == Array("stand-in receipt".utf8))
    }

    @Test("each tampered part fails at its own step")
    func tampered() async throws {
        let other = P256.Signing.PrivateKey()
        var cases: [(String, StandInAppAttestKey.AttestationParts, AppAttestFailure)] = []
        var p = device.parts()
        p.fmt = "packed"
        cases.append(("fmt", p, .malformed("fmt is not apple-appattest")))
        p = device.parts()
        p.issuerKey = other
        cases.append(("signed by a key that is not the intermediate's", p, .certificateChain("")))
        p = device.parts()
        p.includeIntermediate = false
        cases.append(("no intermediate", p, .certificateChain("")))
        p = device.parts()
        p.nonce = Array(repeating: 7, count: 32)
        cases.append(("nonce", p, .nonce))
        p = device.parts()
        p.certifiedKey = other.publicKey
        cases.append(("the certificate names another key", p, .keyId))
        p = device.parts()
        p.authenticatorData.rpIdHash = Array(SHA256.hash(data: Array("ABCDE12345.com.example.other".utf8)))
        cases.append(("another App ID", p, .appId))
        p = device.parts()
        p.authenticatorData.counter = 1
        cases.append(("counter", p, .counter))
        p = device.parts()
        p.authenticatorData.aaguid = AppAttestEnvironment.development.aaguid
        cases.append(("a development key where production is required", p, .environment("")))
        p = device.parts()
        p.authenticatorData.aaguid = Array("appattestXXXXXXX".utf8)
        cases.append(("an aaguid of no environment", p, .environment("")))
        p = device.parts()
        p.authenticatorData.credentialId = Array(repeating: 1, count: 32)
        cases.append(("credential id", p, .keyId))

        for (name, parts, expected) in cases {
            let object = try device.attestation(challenge: challenge, parts: parts)
            let failure = failure { () throws(AppAttestFailure) in try verify(object) }
            #expect(failure.map { Self.sameStep($0, expected) } == true, "\(name): \(String(describing: failure))")
        }
    }

    @Test("another challenge, another key id, garbage and a credential expired at the time of verification are refused")
    func wrongInputs() async throws {
        let object = try device.attestation(challenge: challenge)
        #expect(failure { () throws(AppAttestFailure) in try verify(object, challenge: Array(repeating: 9, count: 32)) } == .nonce)
        #expect(failure { () throws(AppAttestFailure) in try verify(object, keyId: Array(repeating: 0, count: 32)) } == .keyId)
        let late = pki.now + 4 * 86_400
        let expired = failure { () throws(AppAttestFailure) in try verify(object, at: late) }
        #expect(expired.map { Self.sameStep($0, .certificateChain("")) } == true, "\(String(describing: expired))")
        for garbage in [[], [0xA0], Array(object.dropLast()), object + [0], [0xBF, 0xFF], [0x5B] + Array(repeating: 0xFF, count: 8)] {
            let refused = failure { () throws(AppAttestFailure) in try verify(garbage) }
            #expect(refused.map { Self.sameStep($0, .malformed("")) } == true, "\(garbage.prefix(4)): \(String(describing: refused))")
        }
    }

    @Test("development keys are accepted only where development is allowed")
    func development() async throws {
        let dev = StandInAppAttestKey(pki: pki, appIdentifier: Self.app.appIdentifier, environment: .development)
        let object = try dev.attestation(challenge: challenge)
        let key = try verify(object, keyId: dev.keyId, environments: [.production, .development])
        #expect(key.environment == .development)
    }

    @Test("a certificate chain to Apple's root is refused by a verifier trusting only the stand-in's, and the other way")
    func roots() async throws {
        let apple = try AppAttestVerifier.apple()
        let object = try device.attestation(challenge: challenge)
        do {
            _ = try apple.verifyAttestation(
                object,
                keyId: device.keyId,
                challenge: challenge,
                app: Self.app,
                environments: [.production],
                now: pki.now
            )
            Issue.record("accepted a chain to another root")
        } catch {
            #expect(Self.sameStep(error, .certificateChain("")))
        }
    }

    static func sameStep(_ a: AppAttestFailure, _ b: AppAttestFailure) -> Bool {
        switch (a, b) {
        case (.malformed, .malformed), (.certificateChain, .certificateChain), (.environment, .environment),
            (.challenge, .challenge), (.assertionMalformed, .assertionMalformed):
            true
        default: a == b
        }
    }
}
