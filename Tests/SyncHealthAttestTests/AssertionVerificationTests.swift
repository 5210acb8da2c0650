import Crypto
import Foundation
import SyncHealthAttest
import SyncHealthAttestTesting
import Testing

@Suite("App Attest: assertions sign the request body, once")
struct AssertionVerificationTests {
    let app = AttestationVerificationTests.app
    let body = Array(#"{"appId":"com.example.notes","deviceId":"d1","events":[]}"#.utf8)

    func verify(_ assertion: [UInt8], body: [UInt8]? = nil, key: StandInAppAttestKey, last: UInt32 = 0) throws(AppAttestFailure) -> UInt32 {
        try AppAttestVerifier.verifyAssertion(
            assertion,
            clientData: body ?? self.body,
            publicKey: Array(key.privateKey.publicKey.x963Representation),
            lastCounter: last,
            app: app
        )
    }

    @Test("each assertion's counter is returned; the same counter again is a replay")
    func counters() throws {
        var key = StandInAppAttestKey(pki: try StandInAppAttest(), appIdentifier: app.appIdentifier)
        let first = try key.assertion(clientData: body)
        #expect(try verify(first, key: key) == 1)
        let second = try key.assertion(clientData: body)
        #expect(try verify(second, key: key, last: 1) == 2)
        #expect(throws: AppAttestFailure.replayed) { try verify(first, key: key, last: 2) }
        #expect(throws: AppAttestFailure.replayed) { try verify(second, key: key, last: 2) }
    }

    @Test("another body, another key, another app and unreadable assertions are refused at their own step")
    func refused() throws {
        let key = StandInAppAttestKey(pki: try StandInAppAttest(), appIdentifier: app.appIdentifier)
        let assertion = try key.assertion(clientData: body, counter: 5)
        #expect(throws: AppAttestFailure.signature) { try verify(assertion, body: body + [0x20], key: key) }
        let stranger = StandInAppAttestKey(pki: key.pki, appIdentifier: app.appIdentifier)
        #expect(throws: AppAttestFailure.signature) { try verify(assertion, key: stranger) }
        let otherApp = try key.assertion(clientData: body, counter: 6, appIdentifier: "ABCDE12345.com.example.other")
        #expect(throws: AppAttestFailure.appId) { try verify(otherApp, key: key) }
        for garbage: [UInt8] in [[], [0xA2], Array(assertion.dropLast()), CBORValue.map([(.text("signature"), .bytes([1]))]).encoded()] {
            #expect(throws: AppAttestFailure.self) { try verify(garbage, key: key) }
            do {
                _ = try verify(garbage, key: key)
            } catch {
                guard case .assertionMalformed = error else {
                    Issue.record("\(garbage): \(error)")
                    continue
                }
            }
        }
        #expect(throws: AppAttestFailure.unknownKey) {
            try AppAttestVerifier.verifyAssertion(assertion, clientData: body, publicKey: [4, 1, 2], lastCounter: 0, app: app)
        }
    }
}

@Suite("CBOR: App Attest's objects read, and hostile documents refused without cost")
struct CBORTests {
    @Test("a written document reads back the same")
    func roundTrip() throws {
        let value = CBORValue.map([
            (.text("fmt"), .text("apple-appattest")),
            (.text("n"), .array([.unsigned(0), .unsigned(23), .unsigned(24), .unsigned(70_000), .unsigned(UInt64.max), .negative(4)])),
            (.text("b"), .bytes(Array(repeating: 3, count: 300))),
            (.text("flags"), .array([.bool(true), .bool(false), .null])),
        ])
        #expect(try CBORValue.decode(value.encoded()) == value)
    }

    @Test(
        "truncated, trailing, indefinite, tagged, float, repeated-key, lying-length and deeply nested documents are refused",
        arguments: [
            [], [0x18], [0x00, 0x00], [0x5F], [0xC0, 0x00], [0xF9, 0x00, 0x00], [0xA2, 0x61, 0x61, 0x00, 0x61, 0x61, 0x01],
            [0x5B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], [0x9B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF],
            [0xBA, 0xFF, 0xFF, 0xFF, 0xFF], [0x62, 0xFF, 0xFE], Array(repeating: 0x81, count: 5000) + [0x00],
        ] as [[UInt8]]
    )
    func hostile(bytes: [UInt8]) {
        #expect(throws: CBORError.self) { try CBORValue.decode(bytes) }
    }
}

@Suite("SYNCHEALTH_APP_ATTEST is read strictly")
struct AppAttestPolicyTests {
    @Test("apps, App IDs and modes are read")
    func reads() throws {
        let policy = try AppAttestPolicy(
            parsing: "notes=ABCDE12345.com.example.notes:require, photos=ABCDE12345.com.example.photos:report",
            allowsDevelopment: true
        )
        #expect(policy.apps["notes"]?.appIdentifier == "ABCDE12345.com.example.notes")
        #expect(policy.apps["notes"]?.mode == .require)
        #expect(policy.apps["photos"]?.mode == .report)
        #expect(policy.environments == [.production, .development])
        #expect(try AppAttestPolicy(parsing: "", allowsDevelopment: false).apps.isEmpty)
    }

    @Test(
        "entries without an App ID, with a short team id, a mode of no kind or an app twice are refused",
        arguments: [
            "notes", "notes=com.example.notes:require", "notes=ABC.com.example:require", "notes=ABCDE12345.com.x:maybe",
            "notes=ABCDE12345.com.x:report,notes=ABCDE12345.com.y:report", "=ABCDE12345.com.x:report",
        ]
    )
    func refuses(text: String) {
        #expect(throws: AppAttestPolicyError.self) { try AppAttestPolicy(parsing: text, allowsDevelopment: false) }
    }
}
