import Crypto
import Foundation
import SyncHealthAttest
import SyncHealthAttestTesting
import Testing

@Suite("App Attest: the authenticator data's real layouts are read, and nothing else after them")
struct AuthenticatorDataLayoutTests {
    let app = AttestationVerificationTests.app
    let challenge = Array((0..<32).map { UInt8($0) })
    let body = Array(#"{"events":[]}"#.utf8)

    func failure<T>(_ body: () throws(AppAttestFailure) -> T) -> AppAttestFailure? {
        do {
            _ = try body()
            return nil
        } catch {
            return error
        }
    }

    @Test(
        "an attestation with the extensions map after the COSE key verifies with and without the ED bit, and one without the map",
        arguments: [
            (nil, false), (AuthenticatorData.appleExtensions(validationCategory: 3, bundleVersion: "4.2.1"), false),
            (AuthenticatorData.appleExtensions(validationCategory: 3, bundleVersion: "4.2.1"), true),
        ] as [([UInt8]?, Bool)]
    )
    func attestationLayouts(extensions: [UInt8]?, extendedFlag: Bool) throws {
        let pki = try StandInAppAttest()
        let device = StandInAppAttestKey(pki: pki, appIdentifier: app.appIdentifier)
        let object = try device.attestation(challenge: challenge, parts: device.parts(extensions: extensions, extendedFlag: extendedFlag))
        let key = try pki.verifier.verifyAttestation(
            object,
            keyId: device.keyId,
            challenge: challenge,
            app: app,
            environments: [.production],
            now: pki.now
        )
        #expect(key.validationCategory == (extensions == nil ? nil : 3))
        #expect(key.bundleVersion == (extensions == nil ? nil : "4.2.1"))
        // The stand-in's authData is the devices' layout: the COSE key a device writes, 77 bytes, after the id.
        let authData = try #require(CBORValue.decode(object)["authData"]?.byteString)
        #expect(authData.count == 55 + 32 + 77 + (extensions?.count ?? 0))
        #expect(authData[32] == (extendedFlag ? 0xC0 : 0x40))
    }

    @Test("assertions of 37 bytes with flags 0x40, 0x00 and 0xC0, with and without an extensions map, verify")
    func assertionLayouts() throws {
        let key = StandInAppAttestKey(pki: try StandInAppAttest(), appIdentifier: app.appIdentifier)
        let publicKey = Array(key.privateKey.publicKey.x963Representation)
        let map = AuthenticatorData.appleExtensions(validationCategory: 1, bundleVersion: "7")
        for (counter, extensions) in [(1, nil), (2, map)] as [(UInt32, [UInt8]?)] {
            let assertion = try key.assertion(clientData: body, counter: counter, extensions: extensions)
            #expect(
                try AppAttestVerifier.verifyAssertion(assertion, clientData: body, publicKey: publicKey, lastCounter: counter - 1, app: app)
                    == counter
            )
        }
        for flags: UInt8 in [0x00, 0x40, 0xC0] {
            let auth = AuthenticatorData(rpIdHash: app.rpIdHash, flags: flags, counter: 9)
            #expect(try AuthenticatorData(assertion: auth.bytes).flags == flags)
        }
    }

    /// An assertion whose authenticator data is `authData`, signed honestly, so that only the layout can fail.
    func signed(_ authData: [UInt8], key: StandInAppAttestKey) throws -> [UInt8] {
        let nonce = Array(SHA256.hash(data: authData + Array(SHA256.hash(data: body))))
        let signature = try key.privateKey.signature(for: nonce)
        return CBORValue.map([(.text("signature"), .bytes(Array(signature.derRepresentation))), (.text("authenticatorData"), .bytes(authData))])
            .encoded()
    }

    @Test("anything after an assertion's 37 bytes but one well-formed, small, shallow map is refused, saying so")
    func assertionTrailers() throws {
        let key = StandInAppAttestKey(pki: try StandInAppAttest(), appIdentifier: app.appIdentifier)
        let publicKey = Array(key.privateKey.publicKey.x963Representation)
        let head = AuthenticatorData(rpIdHash: app.rpIdHash, flags: 0x40, counter: 1).bytes
        let map = AuthenticatorData.appleExtensions(validationCategory: 1, bundleVersion: "7")
        var deep: CBORValue = .unsigned(0)
        for _ in 0..<8 { deep = .map([(.text("k"), deep)]) }
        let big = CBORValue.map([(.text("k"), .bytes(Array(repeating: 0, count: 2000)))]).encoded()
        let cases: [(String, [UInt8], String)] = [
            ("short", Array(head.prefix(36)), "36 bytes"),
            ("a credential where none belongs", head + Array(repeating: 0, count: 50), "not one CBOR map"),
            ("two maps", head + map + map, "not one CBOR map"),
            ("an array", head + CBORValue.array([.unsigned(1)]).encoded(), "not a CBOR map"),
            ("a truncated map", head + map.dropLast(), "not one CBOR map"),
            ("a deep map", head + deep.encoded(), "not one CBOR map"),
            ("a large map", head + big, "at most 1024"),
            ("a category of 3 bytes", head + CBORValue.map([(.text("apple_validation_category_01"), .bytes([1, 0, 0]))]).encoded(), "not 4 bytes"),
            ("a version that is a number", head + CBORValue.map([(.text("apple_bundle_version_01"), .unsigned(1))]).encoded(), "not text"),
        ]
        for (name, authData, message) in cases {
            let assertion = try signed(authData, key: key)
            let refused = failure { () throws(AppAttestFailure) in
                try AppAttestVerifier.verifyAssertion(assertion, clientData: body, publicKey: publicKey, lastCounter: 0, app: app)
            }
            guard case .assertionMalformed(let why)? = refused else {
                Issue.record("\(name): \(String(describing: refused))")
                continue
            }
            #expect(why.contains(message), "\(name): \(why)")
        }
    }

    @Test("an attestation's authenticator data without its COSE key, or with bytes after the map, is refused, saying so")
    func attestationTrailers() throws {
        let pki = try StandInAppAttest()
        let device = StandInAppAttestKey(pki: pki, appIdentifier: app.appIdentifier)
        var noKey = device.parts()
        noKey.authenticatorData.credentialPublicKey = nil
        var trailing = device.parts(extensions: AuthenticatorData.appleExtensions(validationCategory: 1, bundleVersion: "1") + [0])
        trailing.authenticatorData.flags = 0x40
        for (name, parts, message) in [("no COSE key", noKey, "no credential public key"), ("a byte after the map", trailing, "not one CBOR map")] {
            let object = try device.attestation(challenge: challenge, parts: parts)
            let refused = failure { () throws(AppAttestFailure) in
                try pki.verifier.verifyAttestation(
                    object,
                    keyId: device.keyId,
                    challenge: challenge,
                    app: app,
                    environments: [.production],
                    now: pki.now
                )
            }
            guard case .malformed(let why)? = refused else {
                Issue.record("\(name): \(String(describing: refused))")
                continue
            }
            #expect(why.contains(message), "\(name): \(why)")
        }
    }
}

@Suite("App Attest: a hostile x5c costs a bounded amount of work")
struct HostileChainTests {
    @Test("a looping x5c of 8 and of 10 certificates is refused at the chain step in well under a second", arguments: [8, 10])
    func looping(count: Int) throws {
        let pki = try StandInAppAttest()
        let app = AttestationVerificationTests.app
        let device = StandInAppAttestKey(pki: pki, appIdentifier: app.appIdentifier)
        let challenge = Array(repeating: UInt8(1), count: 32)
        var parts = device.parts()
        parts.includeIntermediate = false
        parts.extraCertificates = try StandInAppAttest.loopingCertificates(count - 1)
        let object = try device.attestation(challenge: challenge, parts: parts)
        let started = ContinuousClock.now
        do {
            _ = try pki.verifier.verifyAttestation(
                object,
                keyId: device.keyId,
                challenge: challenge,
                app: app,
                environments: [.production],
                now: pki.now
            )
            Issue.record("accepted a looping chain")
        } catch {
            guard case .certificateChain(let why) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(why.contains("x5c holds \(count) certificates"), "\(why)")
        }
        // Refused before any signature is checked: milliseconds, where path building took seconds to minutes.
        #expect(ContinuousClock.now - started < .seconds(1))
    }

    @Test("two certificates whose second issues itself and is no trusted root's are refused at the chain step")
    func twoHostile() throws {
        let pki = try StandInAppAttest()
        let app = AttestationVerificationTests.app
        let device = StandInAppAttestKey(pki: pki, appIdentifier: app.appIdentifier)
        let challenge = Array(repeating: UInt8(1), count: 32)
        var parts = device.parts()
        parts.includeIntermediate = false
        parts.extraCertificates = try StandInAppAttest.loopingCertificates(1)
        let object = try device.attestation(challenge: challenge, parts: parts)
        do {
            _ = try pki.verifier.verifyAttestation(
                object,
                keyId: device.keyId,
                challenge: challenge,
                app: app,
                environments: [.production],
                now: pki.now
            )
            Issue.record("accepted a self-issued intermediate")
        } catch {
            guard case .certificateChain = error else {
                Issue.record("\(error)")
                return
            }
        }
    }
}
