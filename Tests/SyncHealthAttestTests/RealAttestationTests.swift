import Crypto
import Foundation
import SwiftASN1
import SyncHealthAttest
import Testing
import X509

/// The real development attestation in the shared reference data (`app-attest/`): Apple's chain and receipt.
@Suite("App Attest: a real attestation from a development build")
struct RealAttestationTests {
    static let app = AppAttestApp(appId: "real", appIdentifier: "VNP5A9S22V.76R387MAVZ", mode: .require)
    static let keyIdHex = "e0b3093bfc2447493a4c80f660181ba8aa31a894e857ca36e120901b3e7e1309"
    let object: [UInt8]

    init() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/development-attestation.b64")
        let text = try String(contentsOf: url, encoding: .utf8).filter { !$0.isWhitespace }
        object = Array(try #require(Data(base64Encoded: text)))
    }

    static func bytes(hex: String) -> [UInt8] {
        stride(from: 0, to: hex.count, by: 2).compactMap { UInt8(hex.dropFirst($0).prefix(2), radix: 16) }
    }

    @Test("the chain verifies against Apple's built-in root on its date; the nonce step is reached and refuses an unknown challenge")
    func chainAtItsDate() async throws {
        let verifier = try AppAttestVerifier.apple()
        let at = try #require(ISO8601DateFormatter().date(from: "2022-08-25T06:00:00Z"))
        do {
            _ = try verifier.verifyAttestation(
                object,
                keyId: Self.bytes(hex: Self.keyIdHex),
                challenge: Array("unknown".utf8),
                app: Self.app,
                environments: [.production, .development],
                now: at
            )
            Issue.record("accepted an attestation for a challenge it was not made for")
        } catch {
            // The chain step comes first: failing at the nonce means the chain to Apple's root held.
            #expect(error == .nonce)
        }
    }

    @Test("a year later the credential certificate has expired and the chain step refuses it")
    func chainExpired() async throws {
        let verifier = try AppAttestVerifier.apple()
        let at = try #require(ISO8601DateFormatter().date(from: "2023-08-25T06:00:00Z"))
        do {
            _ = try verifier.verifyAttestation(
                object,
                keyId: Self.bytes(hex: Self.keyIdHex),
                challenge: [],
                app: Self.app,
                environments: [.development],
                now: at
            )
            Issue.record("accepted an expired credential certificate")
        } catch {
            guard case .certificateChain = error else {
                Issue.record("expected the chain step, got \(error)")
                return
            }
        }
    }

    @Test("its App ID hash, development aaguid, key id and nonce extension are read as published")
    func fields() throws {
        let parsed = try CBORValue.decode(object)
        #expect(parsed["fmt"] == .text("apple-appattest"))
        let auth = try AuthenticatorData(attestation: try #require(parsed["authData"]?.byteString))
        #expect(auth.rpIdHash == Self.app.rpIdHash)
        #expect(auth.counter == 0)
        #expect(auth.aaguid.flatMap(AppAttestEnvironment.init(aaguid:)) == .development)
        #expect(auth.credentialId == Self.bytes(hex: Self.keyIdHex))
        guard case .array(let chain)? = parsed["attStmt"]?["x5c"] else {
            Issue.record("no x5c")
            return
        }
        #expect(chain.count == 2)
        let credential = try Certificate(derEncoded: try #require(chain[0].byteString))
        let key = try #require(P256.Signing.PublicKey(credential.publicKey))
        #expect(Array(SHA256.hash(data: key.x963Representation)) == Self.bytes(hex: Self.keyIdHex))
        #expect(
            try AppAttestVerifier.nonce(in: credential)
                == Self.bytes(hex: "a592d795465e4f20d38eebaa9f3c7a1e372f9900a73c1b324ccd0f958f002a73")
        )
        #expect(parsed["attStmt"]?["receipt"]?.byteString?.isEmpty == false)
    }
}
