import Foundation
import SyncHealthAttest
import SyncHealthAttestTesting
import Testing

@Suite("synchealth app-attest verify: the offline check reports each vector valid and names the step each change fails")
struct OfflineCheckTests {
    func check(
        _ vector: GenuineVector,
        appIdentifier: String? = nil,
        keyId: [UInt8]? = nil,
        clientDataHash: [UInt8]? = nil,
        at: Date? = nil,
        verifier: AppAttestVerifier? = nil,
        development: Bool = true,
        assertion: (object: [UInt8], clientData: [UInt8], previousCounter: UInt32)? = nil
    ) -> AppAttestOfflineCheck.Report {
        AppAttestOfflineCheck(
            appIdentifier: appIdentifier ?? vector.app.appIdentifier,
            keyId: keyId ?? vector.keyId,
            attestation: vector.attestation,
            clientDataHash: clientDataHash ?? vector.clientDataHash,
            at: at ?? vector.verifyAt,
            verifier: verifier ?? GenuineVectorTests.apple,
            allowsDevelopment: development,
            assertion: assertion
        )
        .run()
    }

    @Test("each vector is valid, with its environment, key id and Apple's extensions where written", arguments: GenuineVector.all)
    func valid(vector: GenuineVector) {
        let report = check(vector)
        #expect(report.result == "valid")
        #expect(report.type == nil)
        #expect(report.environment == vector.environment.rawValue)
        #expect(report.keyId == Data(vector.keyId).base64EncodedString())
        #expect(report.validationCategory == (vector.name == "apple-guide-2026-production" ? 1 : nil))
        #expect(report.bundleVersion == (vector.name == "apple-guide-2026-production" ? "1" : nil))
    }

    @Test("each changed input is refused with the API's problem slug", arguments: GenuineVector.all)
    func refused(vector: GenuineVector) throws {
        var hash = vector.clientDataHash
        hash[0] ^= 0xFF
        var keyId = vector.keyId
        keyId[0] ^= 0xFF
        let cases: [(String, AppAttestOfflineCheck.Report, String)] = [
            ("app", check(vector, appIdentifier: "ABCDE12345.com.example.other"), "attestation-app-id"),
            ("hash", check(vector, clientDataHash: hash), "attestation-nonce"),
            ("key", check(vector, keyId: keyId), "attestation-key-id"),
            ("time", check(vector, at: vector.verifyAt + 30 * 86_400), "attestation-chain"),
            ("root", check(vector, verifier: try StandInAppAttest().verifier), "attestation-chain"),
        ]
        for (name, report, type) in cases {
            #expect(report.result == "refused", "\(name)")
            #expect(report.type == type, "\(name): \(String(describing: report.type))")
        }
        if vector.environment == .development {
            #expect(check(vector, development: false).type == "attestation-environment")
        }
    }

    @Test("an assertion is checked with the key the attestation carries: its counter, or the step that fails")
    func assertion() throws {
        let vector = try #require(GenuineVector.all.first { $0.assertion != nil })
        let signed = try #require(vector.assertion)
        let report = check(vector, assertion: (signed.object, signed.clientData, signed.previousCounter))
        #expect(report.result == "valid")
        #expect(report.counter == signed.counter)
        #expect(check(vector, assertion: (signed.object, signed.clientData + [0x0A], 0)).type == "assertion-signature")
        #expect(check(vector, assertion: (signed.object, signed.clientData, signed.counter)).type == "assertion-replayed")
        #expect(check(vector, assertion: (Array(signed.object.dropLast()), signed.clientData, 0)).type == "assertion-malformed")
    }
}
