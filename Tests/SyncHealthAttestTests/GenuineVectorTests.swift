import Crypto
import Foundation
import SyncHealthAttest
import SyncHealthAttestTesting
import Testing
import X509

/// A genuine App Attest object from `Fixtures/genuine-vectors.json` (a copy of the shared reference data): made by a
/// real device or by Apple, each checked there with an independent verifier.
struct GenuineVector: Sendable, CustomStringConvertible {
    let name: String
    let app: AppAttestApp
    let keyId: [UInt8]
    let clientDataHash: [UInt8]
    let environment: AppAttestEnvironment
    let verifyAt: Date
    let attestation: [UInt8]
    let assertion: Assertion?

    struct Assertion: Sendable {
        let object: [UInt8]
        let clientData: [UInt8]
        let counter: UInt32
        let previousCounter: UInt32
    }

    var description: String { name }

    static let all: [GenuineVector] = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/genuine-vectors.json")
        guard let data = try? Data(contentsOf: url), let items = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]] else {
            return []
        }
        return items.compactMap { item in
            guard let name = item["name"] as? String, let appId = item["appId"] as? String,
                let keyId = (item["keyIdBase64"] as? String).flatMap({ Data(base64Encoded: $0) }),
                let hash = item["clientDataHashHex"] as? String,
                let environment = (item["environment"] as? String).flatMap(AppAttestEnvironment.init(rawValue:)),
                let at = (item["verifyAt"] as? String).flatMap({ ISO8601DateFormatter().date(from: $0) }),
                let attestation = (item["attestationBase64"] as? String).flatMap({ Data(base64Encoded: $0) })
            else { return nil }
            var assertion: Assertion?
            if let a = item["assertion"] as? [String: Any], let object = (a["assertionBase64"] as? String).flatMap({ Data(base64Encoded: $0) }),
                let clientData = a["clientDataUtf8"] as? String, let counter = a["counter"] as? Int, let previous = a["previousCounter"] as? Int
            {
                assertion = Assertion(
                    object: Array(object),
                    clientData: Array(clientData.utf8),
                    counter: UInt32(counter),
                    previousCounter: UInt32(previous)
                )
            }
            return GenuineVector(
                name: name,
                app: AppAttestApp(appId: name, appIdentifier: appId, mode: .require),
                keyId: Array(keyId),
                clientDataHash: bytes(hex: hash),
                environment: environment,
                verifyAt: at,
                attestation: Array(attestation),
                assertion: assertion
            )
        }
    }()

    static func bytes(hex: String) -> [UInt8] {
        stride(from: 0, to: hex.count, by: 2).compactMap { UInt8(hex.dropFirst($0).prefix(2), radix: 16) }
    }

    func verify(
        verifier: AppAttestVerifier? = nil,
        keyId: [UInt8]? = nil,
        clientDataHash: [UInt8]? = nil,
        appIdentifier: String? = nil,
        at: Date? = nil
    ) throws(AppAttestFailure) -> AttestedKey {
        let verifier = verifier ?? GenuineVectorTests.apple
        return try verifier.verifyAttestation(
            attestation,
            keyId: keyId ?? self.keyId,
            clientDataHash: clientDataHash ?? self.clientDataHash,
            app: appIdentifier.map { AppAttestApp(appId: name, appIdentifier: $0, mode: .require) } ?? app,
            environments: [.production, .development],
            now: at ?? verifyAt
        )
    }
}

@Suite("App Attest: genuine objects from real devices and Apple verify, and each changed input is refused")
struct GenuineVectorTests {
    static let apple: AppAttestVerifier = (try? AppAttestVerifier.apple()) ?? AppAttestVerifier(roots: [])

    func failure(_ body: () throws(AppAttestFailure) -> Any) -> AppAttestFailure? {
        do {
            _ = try body()
            return nil
        } catch {
            return error
        }
    }

    @Test("the reference data holds both vectors, one with an assertion")
    func loaded() {
        #expect(GenuineVector.all.map(\.name) == ["ios-14.2-development", "apple-guide-2026-production"])
        #expect(GenuineVector.all.first?.assertion != nil)
    }

    @Test("each attestation verifies with Apple's root at its date, in its environment, with its key id", arguments: GenuineVector.all)
    func attestationVerifies(vector: GenuineVector) throws {
        let key = try vector.verify()
        #expect(key.keyId == vector.keyId)
        #expect(key.environment == vector.environment)
        #expect(Array(SHA256.hash(data: key.publicKey)) == vector.keyId)
        #expect(!key.receipt.isEmpty)
    }

    @Test("Apple's 2026 sample carries the extensions map after the COSE key without the ED bit; its fields are read")
    func extensionsRead() throws {
        let vector = try #require(GenuineVector.all.first { $0.name == "apple-guide-2026-production" })
        let key = try vector.verify()
        #expect(key.validationCategory == 1)
        #expect(key.bundleVersion == "1")
        let parsed = try CBORValue.decode(vector.attestation)
        let authBytes = try #require(parsed["authData"]?.byteString)
        let auth = try AuthenticatorData(attestation: authBytes)
        #expect(auth.flags == 0x40)
        #expect(auth.extensions?.count == 62)
        // The stand-in writes the same bytes for the same fields: the layout is the real one.
        #expect(auth.extensions == AuthenticatorData.appleExtensions(validationCategory: 1, bundleVersion: "1"))
        #expect(auth.bytes == authBytes)
    }

    @Test("a device before iOS 27 writes no extensions, and none is required")
    func noExtensions() throws {
        let vector = try #require(GenuineVector.all.first { $0.name == "ios-14.2-development" })
        let key = try vector.verify()
        #expect(key.validationCategory == nil)
        #expect(key.bundleVersion == nil)
    }

    @Test("each attestation is refused for another App ID, clientDataHash, key id, time or root", arguments: GenuineVector.all)
    func attestationRefused(vector: GenuineVector) throws {
        #expect(failure { () throws(AppAttestFailure) in try vector.verify(appIdentifier: "ABCDE12345.com.example.other") } == .appId)
        var hash = vector.clientDataHash
        hash[0] ^= 1
        #expect(failure { () throws(AppAttestFailure) in try vector.verify(clientDataHash: hash) } == .nonce)
        var keyId = vector.keyId
        keyId[31] ^= 1
        #expect(failure { () throws(AppAttestFailure) in try vector.verify(keyId: keyId) } == .keyId)
        for at in [vector.verifyAt - 3 * 86_400, vector.verifyAt + 4 * 86_400] {
            let late = failure { () throws(AppAttestFailure) in try vector.verify(at: at) }
            guard case .certificateChain(let why)? = late else {
                Issue.record("\(at): \(String(describing: late))")
                continue
            }
            #expect(why.contains("credential certificate is not valid"), "\(why)")
        }
        let other = try StandInAppAttest()
        let rooted = failure { () throws(AppAttestFailure) in try vector.verify(verifier: other.verifier) }
        guard case .certificateChain(let why)? = rooted else {
            Issue.record("another root: \(String(describing: rooted))")
            return
        }
        #expect(why.contains("trusted App Attestation root"), "\(why)")
    }

    @Test("a genuine assertion (37 bytes, flags 0x40) verifies with the attested key and gives its counter")
    func assertionVerifies() throws {
        let vector = try #require(GenuineVector.all.first { $0.assertion != nil })
        let assertion = try #require(vector.assertion)
        let key = try vector.verify()
        let auth = try AuthenticatorData(assertion: try #require(CBORValue.decode(assertion.object)["authenticatorData"]?.byteString))
        #expect(auth.flags == 0x40)
        #expect(auth.bytes.count == 37)
        let counter = try AppAttestVerifier.verifyAssertion(
            assertion.object,
            clientData: assertion.clientData,
            publicKey: key.publicKey,
            lastCounter: assertion.previousCounter,
            app: vector.app
        )
        #expect(counter == assertion.counter)
    }

    @Test("the genuine assertion is refused for other client data, another key, another app and a counter not above the last")
    func assertionRefused() throws {
        let vector = try #require(GenuineVector.all.first { $0.assertion != nil })
        let assertion = try #require(vector.assertion)
        let key = try vector.verify()
        func check(
            clientData: [UInt8]? = nil,
            publicKey: [UInt8]? = nil,
            last: UInt32? = nil,
            app: AppAttestApp? = nil
        ) -> AppAttestFailure? {
            failure { () throws(AppAttestFailure) in
                try AppAttestVerifier.verifyAssertion(
                    assertion.object,
                    clientData: clientData ?? assertion.clientData,
                    publicKey: publicKey ?? key.publicKey,
                    lastCounter: last ?? assertion.previousCounter,
                    app: app ?? vector.app
                )
            }
        }
        #expect(check(clientData: assertion.clientData + [0x20]) == .signature)
        #expect(check(publicKey: Array(P256.Signing.PrivateKey().publicKey.x963Representation)) == .signature)
        #expect(check(last: assertion.counter) == .replayed)
        #expect(check(app: AppAttestApp(appId: "x", appIdentifier: "ABCDE12345.com.example.other", mode: .require)) == .appId)
    }
}
