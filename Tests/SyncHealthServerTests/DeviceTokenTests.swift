import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncHealthAttest
import SyncHealthAttestTesting
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthSQLite
import SyncHealthStore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthServer

extension AttestingDevice {
    /// `POST /v1/attest/token`: an assertion of the device's key over a fresh challenge; the answer.
    mutating func token(_ client: any TestClientProtocol) async throws -> TestResponse {
        let challenge = try await AppAttestTests.challenge(client, appId: appId)
        let assertion = try key.assertion(clientData: challenge)
        let body = """
            {"appId": "\(appId)", "deviceId": "\(deviceId)", "keyId": "\(keyId)", "challenge": "\(Data(challenge).base64EncodedString())", \
            "assertion": "\(Data(assertion).base64EncodedString())"}
            """
        return try await client.execute(uri: "/v1/attest/token", method: .post, headers: headers(ingestKey), body: ByteBuffer(string: body))
    }

    /// The token of a `201` answer.
    static func tokenText(_ response: TestResponse) throws -> String {
        try #require(try json(response)["token"] as? String)
    }
}

/// Headers carrying a device token.
func tokenHeaders(_ token: String) -> HTTPFields {
    var fields = HTTPFields()
    fields.set("SyncHealth-Device-Token", token)
    return fields
}

@Suite("Device tokens: one proof of the key, then uploads as cheap as unsigned ones")
struct DeviceTokenTests {
    static func account(_ device: AttestingDevice, _ id: String) -> ByteBuffer {
        device.body([event(id, #""kind": "account", "status": "available""#)])
    }

    @Test("the token's base64url reads what Foundation's base64 wrote, for every length; other text is refused")
    func base64URL() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<200 {
            let bytes = (0..<length).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            var text = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            while text.hasSuffix("=") { text.removeLast() }
            #expect(DeviceToken.base64URLDecoded(Array(text.utf8)) == bytes, "\(length)")
        }
        for garbage in ["A", "AB=", "AB+/", "A*BC", "AB", "AAB"] where DeviceToken.base64URLDecoded(Array(garbage.utf8)) != nil {
            // "AB" and "AAB" leave bits over that are not zero padding: refused; the others hold bytes outside the alphabet.
            Issue.record("\(garbage) decoded")
        }
        #expect(DeviceToken.base64URLDecoded(Array("AA".utf8)) == [0])
    }

    @Test("a token from an assertion over a challenge makes uploads attested without an assertion", arguments: ["memory", "sqlite"])
    func tokenUploads(storeKind: String) async throws {
        let pki = try StandInAppAttest(now: AppAttestTests.pkiNow)
        let store: MonitorStore = storeKind == "memory" ? .local(InMemoryStore()) : .local(try SQLiteStore(directory: temporaryDirectory()))
        try await AppAttestTests.service(.require, pki: pki, store: store).test { client in
            var device = AttestingDevice(pki: pki, deviceId: "phone-1")
            #expect(try await device.attest(client).status == .created)
            let issued = try await device.token(client)
            #expect(issued.status == .created, "\(String(buffer: issued.body))")
            #expect(issued.headers[.cacheControl] == "no-store")
            let token = try AttestingDevice.tokenText(issued)
            #expect(token.hasPrefix("sht_"))
            let expires = try #require(try json(issued)["expiresAt"] as? String)
            #expect(expires == (testStart + .seconds(3600)).rfc3339, "an hour by default")
            for round in 0..<3 {
                let response = try await client.post(Self.account(device, "t\(round)"), headers: tokenHeaders(token))
                #expect(response.status == .accepted, "\(String(buffer: response.body))")
            }
            let status = try json(try await client.get("/v1/devices/phone-1?appId=com.example.notes"))
            #expect(status["attested"] as? Bool == true)
            // Assertions are still accepted beside tokens.
            let body = Self.account(device, "signed")
            #expect(try await client.post(body, headers: try device.signed(body)).status == .accepted)
        }
    }

    @Test("a token for another device or app, expired, forged, truncated, or whose key was replaced or erased is 401 with its own type")
    func refusals() async throws {
        let pki = try StandInAppAttest(now: AppAttestTests.pkiNow)
        let service = AppAttestTests.service(.require, pki: pki)
        try await service.test { client in
            var device = AttestingDevice(pki: pki, deviceId: "phone")
            var other = AttestingDevice(pki: pki, deviceId: "tablet")
            #expect(try await device.attest(client).status == .created)
            #expect(try await other.attest(client).status == .created)
            let token = try AttestingDevice.tokenText(try await device.token(client))
            let otherToken = try AttestingDevice.tokenText(try await other.token(client))

            func refusal(_ token: String, for target: AttestingDevice? = nil, _ id: String) async throws -> String {
                let response = try await client.post(Self.account(target ?? device, id), headers: tokenHeaders(token))
                #expect(response.status == .unauthorized, "\(id): \(String(buffer: response.body))")
                return try AppAttestTests.problemType(response)
            }
            #expect(try await refusal(otherToken, "another device") == "token-device")
            #expect(try await refusal(String(token.dropLast(10)), "truncated") == "token-malformed")
            #expect(try await refusal("sht_" + String(repeating: "A", count: 120), "garbage") == "token-malformed")
            var forged = Array(token)
            forged[forged.count - 5] = forged[forged.count - 5] == "A" ? "B" : "A"
            #expect(try await refusal(String(forged), "forged") == "token-forged")
            // Nothing refused was applied.
            let status = try json(try await client.get("/v1/devices/phone?appId=com.example.notes"))
            #expect(status["accountStatus"] == nil || status["accountStatus"] is NSNull)

            // Expired: an hour later.
            service.clock.advance(by: .seconds(3601))
            #expect(try await refusal(token, "expired") == "token-expired")

            // Erased: the device's key goes, and with it its tokens.
            let fresh = try AttestingDevice.tokenText(try await other.token(client))
            #expect(try await client.post(Self.account(other, "before"), headers: tokenHeaders(fresh)).status == .accepted)
            let erased = try await client.execute(uri: "/v1/devices/tablet?appId=com.example.notes", method: .delete, headers: headers(adminKey))
            #expect(erased.status == .noContent)
            #expect(try await refusal(fresh, for: other, "erased") == "token-revoked")

            // Replaced: a new key, proven by the old one; the old key's token is refused.
            let current = try AttestingDevice.tokenText(try await device.token(client))
            var reinstalled = AttestingDevice(pki: pki, deviceId: "phone")
            defer { _ = reinstalled }
            let proof = try await Self.replace(&device, with: reinstalled, client)
            #expect(proof.status == .created, "\(String(buffer: proof.body))")
            #expect(try await refusal(current, "replaced") == "token-revoked")
            let renewed = try AttestingDevice.tokenText(try await reinstalled.token(client))
            #expect(try await client.post(Self.account(reinstalled, "after"), headers: tokenHeaders(renewed)).status == .accepted)
        }
    }

    @Test("expired challenges are forgotten by the refresh timer, not only when new ones are issued")
    func challengesPruned() async throws {
        let pki = try StandInAppAttest(now: AppAttestTests.pkiNow)
        let store = InMemoryStore()
        let service = AppAttestTests.service(.require, pki: pki, store: .local(store))
        try await service.test { client in
            _ = try await AppAttestTests.challenge(client, appId: "com.example.notes")
            _ = try await AppAttestTests.challenge(client, appId: "com.example.notes")
            service.clock.advance(by: .seconds(301))
            // The secrets are due again a minute of the service's clock after they were read: the next tick prunes.
            try await Task.sleep(for: .seconds(1.5))
            #expect(try await store.pruneChallenges(before: service.clock.now, limit: 10) == 0, "the timer forgot both")
        }
    }

    /// `POST /v1/attest` of `next`'s key for the same device id, with an assertion of `current`'s key over the challenge.
    static func replace(_ current: inout AttestingDevice, with next: AttestingDevice, _ client: any TestClientProtocol) async throws -> TestResponse {
        let challenge = try await AppAttestTests.challenge(client, appId: next.appId)
        let attestation = try next.key.attestation(challenge: challenge)
        let proof = try current.key.assertion(clientData: challenge)
        let body = """
            {"appId": "\(next.appId)", "deviceId": "\(next.deviceId)", "keyId": "\(next.keyId)", \
            "attestation": "\(Data(attestation).base64EncodedString())", "challenge": "\(Data(challenge).base64EncodedString())", \
            "currentKeyId": "\(current.keyId)", "currentKeyAssertion": "\(Data(proof).base64EncodedString())"}
            """
        return try await client.execute(uri: "/v1/attest", method: .post, headers: headers(ingestKey), body: ByteBuffer(string: body))
    }

    @Test("an attested device id stays bound: another key is 409 without a proof, accepted with one and audited; one key attests one device id")
    func binding() async throws {
        let pki = try StandInAppAttest(now: AppAttestTests.pkiNow)
        try await AppAttestTests.service(.require, pki: pki).test { client in
            var genuine = AttestingDevice(pki: pki, deviceId: "victim")
            #expect(try await genuine.attest(client).status == .created)
            // An attacker's genuine install attests its own key under the victim's id: refused, the victim unharmed.
            let attacker = AttestingDevice(pki: pki, deviceId: "victim")
            let hijack = try await attacker.attest(client)
            #expect(hijack.status == .conflict)
            #expect(try AppAttestTests.problemType(hijack) == "attestation-device-bound")
            let body = genuine.body([event("g1", #""kind": "account", "status": "available""#)])
            #expect(try await client.post(body, headers: try genuine.signed(body)).status == .accepted, "the victim's key still signs")
            // With a proof made by a key that is not the current one: refused at the proof.
            var impostor = AttestingDevice(pki: pki, deviceId: "victim")
            let wrongProof = try await Self.replace(&impostor, with: attacker, client)
            #expect(wrongProof.status == .unauthorized)
            #expect(try AppAttestTests.problemType(wrongProof) == "assertion-unknown-key")
            // The same key under a second device id: refused.
            var second = AttestingDevice(pki: pki, deviceId: "second")
            second.key = genuine.key
            let reuse = try await second.attest(client)
            #expect(reuse.status == .conflict)
            #expect(try AppAttestTests.problemType(reuse) == "attestation-key-in-use")
            // The device's own proof replaces the key, and the audit log says so.
            let next = AttestingDevice(pki: pki, deviceId: "victim")
            #expect(try await Self.replace(&genuine, with: next, client).status == .created)
            let audit = try json(try await client.get("/v1/audit?limit=100", key: adminKey))["data"] as? [[String: Any]] ?? []
            #expect(
                audit.contains {
                    $0["action"] as? String == "attestation.replace" && ($0["target"] as? String)?.hasPrefix("com.example.notes/victim") == true
                }
            )
            let old = genuine.body([event("g2", #""kind": "account", "status": "available""#)])
            let refused = try await client.post(old, headers: try genuine.signed(old))
            #expect(try AppAttestTests.problemType(refused) == "assertion-unknown-key", "the old key signs no more")
            // After an erasure the id is free.
            #expect(
                try await client.execute(uri: "/v1/devices/victim?appId=com.example.notes", method: .delete, headers: headers(adminKey)).status
                    == .noContent
            )
            let afterErase = AttestingDevice(pki: pki, deviceId: "victim")
            #expect(try await afterErase.attest(client).status == .created)
        }
    }
}

@Suite("Device tokens across PostgreSQL replicas, on the built binary", .serialized)
struct DeviceTokenReplicaTests {
    static let ingest = AppAttestReplicaTests.ingest
    static let admin = "token-admin-0123456789abcdefghijklmnop"

    @Test(
        "a token made on A is accepted on B; its challenge and assertion replayed on B are refused; an erasure on A refuses it on B within a second",
        .enabled(if: PostgresTesting.baseURL != nil)
    )
    func replicas() async throws {
        let pki = try StandInAppAttest()
        let (a, b) = try await AppAttestReplicaTests.replicas(pki, environment: ["SYNCHEALTH_ADMIN_KEYS": Self.admin])
        defer {
            a.stop()
            b.stop()
        }

        var key = StandInAppAttestKey(pki: pki, appIdentifier: AppAttestTests.appIdentifier)
        let keyId = Data(key.keyId).base64EncodedString()
        func challenge(on server: LiveServer) async throws -> (text: String, bytes: [UInt8]) {
            let issued = try await server.request(
                "POST",
                "/v1/attest/challenge",
                key: Self.ingest,
                body: Data(#"{"appId": "com.example.notes"}"#.utf8)
            )
            let text = try #require((try JSONSerialization.jsonObject(with: issued.body) as? [String: Any])?["challenge"] as? String)
            return (text, Array(try #require(Data(base64Encoded: text))))
        }
        let first = try await challenge(on: a)
        let attestation = Data(try key.attestation(challenge: first.bytes)).base64EncodedString()
        let attested = try await a.request(
            "POST",
            "/v1/attest",
            key: Self.ingest,
            body: Data(
                #"{"appId": "com.example.notes", "deviceId": "phone", "keyId": "\#(keyId)", "attestation": "\#(attestation)", "challenge": "\#(first.text)"}"#
                    .utf8
            )
        )
        #expect(attested.status == 201)

        let second = try await challenge(on: b)
        let assertion = Data(try key.assertion(clientData: second.bytes)).base64EncodedString()
        let tokenBody = Data(
            #"{"appId": "com.example.notes", "deviceId": "phone", "keyId": "\#(keyId)", "challenge": "\#(second.text)", "assertion": "\#(assertion)"}"#
                .utf8
        )
        let issued = try await a.request("POST", "/v1/attest/token", key: Self.ingest, body: tokenBody)
        #expect(issued.status == 201, "\(String(decoding: issued.body, as: UTF8.self))")
        let token = try #require((try JSONSerialization.jsonObject(with: issued.body) as? [String: Any])?["token"] as? String)
        let replayed = try await b.request("POST", "/v1/attest/token", key: Self.ingest, body: tokenBody)
        #expect(replayed.status == 401, "the challenge was used on A")

        func upload(_ server: LiveServer, _ id: String) async throws -> (status: Int, body: Data, headers: [String: String]) {
            let body = Data(String(buffer: batch(device: "phone", [event(id, #""kind": "account", "status": "available""#)])).utf8)
            return try await server.request("POST", "/v1/events", key: Self.ingest, body: body, headers: ["SyncHealth-Device-Token": token])
        }
        #expect(try await upload(b, "on-b").status == 202, "B verifies a token A signed (the secret is shared)")
        #expect(try await upload(a, "on-a").status == 202)

        let erased = try await a.request("DELETE", "/v1/devices/phone?appId=com.example.notes", key: Self.admin)
        #expect(erased.status == 204)
        #expect(try await upload(a, "after-a").status == 401, "refused at once where it was erased")
        let started = ContinuousClock.now
        var refusedOnB = false
        while ContinuousClock.now - started < .seconds(3) {
            let answer = try await upload(b, "after-b-\(ContinuousClock.now - started)")
            if answer.status == 401 {
                #expect(String(decoding: answer.body, as: UTF8.self).contains("token-revoked"))
                refusedOnB = true
                break
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(refusedOnB)
        #expect(ContinuousClock.now - started < .seconds(1.5), "within the refresh interval, with room for a slow machine")
    }
}
