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
import Synchronization
import Testing

@testable import SyncHealthServer

/// One install of the app: a software App Attest key, as the device's Secure Enclave would hold it.
struct AttestingDevice {
    var key: StandInAppAttestKey
    let deviceId: String
    let appId: String

    init(pki: StandInAppAttest, deviceId: String, appId: String = "com.example.notes", appIdentifier: String = AppAttestTests.appIdentifier) {
        key = StandInAppAttestKey(pki: pki, appIdentifier: appIdentifier)
        self.deviceId = deviceId
        self.appId = appId
    }

    var keyId: String { Data(key.keyId).base64EncodedString() }

    /// `POST /v1/attest/challenge` then `POST /v1/attest`; the answer of the second.
    func attest(
        _ client: any TestClientProtocol,
        key apiKey: String = ingestKey,
        tamper: ((inout StandInAppAttestKey.AttestationParts) -> Void)? = nil
    )
        async throws -> TestResponse
    {
        let challenge = try await AppAttestTests.challenge(client, appId: appId, key: apiKey)
        var parts = key.parts()
        tamper?(&parts)
        let object = try key.attestation(challenge: challenge, parts: parts)
        return try await AppAttestTests.attest(client, appId: appId, deviceId: deviceId, keyId: keyId, attestation: object, challenge: challenge)
    }

    /// The headers of an upload of `body`, signed with the next counter.
    mutating func signed(_ body: ByteBuffer) throws -> HTTPFields {
        let assertion = try key.assertion(clientData: Array(buffer: body))
        return AppAttestTests.headers(keyId: keyId, assertion: assertion)
    }

    func body(_ events: [String]) -> ByteBuffer { batch(device: deviceId, app: appId, events) }
}

@Suite("App Attest over the API: attest once, sign every upload, refuse what is forged")
struct AppAttestTests {
    static let appIdentifier = "ABCDE12345.com.example.notes"

    static func policy(_ mode: AppAttestMode, development: Bool = false) -> AppAttestPolicy {
        AppAttestPolicy(apps: [AppAttestApp(appId: "com.example.notes", appIdentifier: appIdentifier, mode: mode)], allowsDevelopment: development)
    }

    static func service(_ mode: AppAttestMode, pki: StandInAppAttest, store: MonitorStore = .local(InMemoryStore())) -> TestService {
        TestService(store: store, appAttest: policy(mode), appAttestVerifier: pki.verifier)
    }

    /// A service whose webhooks go to `transport`, loopback receivers allowed.
    static func service(_ mode: AppAttestMode, pki: StandInAppAttest, transport: RecordingTransport) -> TestService {
        TestService(transport: transport, webhooks: .privateAllowed, appAttest: policy(mode), appAttestVerifier: pki.verifier)
    }

    static func headers(keyId: String, assertion: [UInt8]) -> HTTPFields {
        var fields = HTTPFields()
        fields.set("SyncHealth-Key-Id", keyId)
        fields.set("SyncHealth-Assertion", Data(assertion).base64EncodedString())
        return fields
    }

    static func challenge(_ client: any TestClientProtocol, appId: String, key: String = ingestKey) async throws -> [UInt8] {
        let response = try await client.execute(
            uri: "/v1/attest/challenge",
            method: .post,
            headers: SyncHealthServerTests.headers(key),
            body: ByteBuffer(string: #"{"appId": "\#(appId)"}"#)
        )
        #expect(response.status == .created, "\(String(buffer: response.body))")
        let text = try json(response)["challenge"] as? String ?? ""
        return Array(Data(base64Encoded: text) ?? Data())
    }

    static func attest(
        _ client: any TestClientProtocol,
        appId: String,
        deviceId: String,
        keyId: String,
        attestation: [UInt8],
        challenge: [UInt8]
    ) async throws -> TestResponse {
        let body = """
            {"appId": "\(appId)", "deviceId": "\(deviceId)", "keyId": "\(keyId)", "attestation": "\(Data(attestation).base64EncodedString())", \
            "challenge": "\(Data(challenge).base64EncodedString())"}
            """
        return try await client.execute(
            uri: "/v1/attest",
            method: .post,
            headers: SyncHealthServerTests.headers(ingestKey),
            body: ByteBuffer(string: body)
        )
    }

    static func problemType(_ response: TestResponse) throws -> String {
        (try json(response)["type"] as? String ?? "").replacingOccurrences(of: "urn:synchealth:problem:", with: "")
    }

    static var pkiNow: Date { Date(timeIntervalSince1970: Double(testStart.microseconds) / 1_000_000) }

    @Test(
        "a device attests, its signed uploads are applied, and it shows as attested with its environment; the summary counts it",
        arguments: ["memory", "sqlite"]
    )
    func attestedDevice(storeKind: String) async throws {
        let pki = try StandInAppAttest(now: Self.pkiNow)
        let store: MonitorStore = storeKind == "memory" ? .local(InMemoryStore()) : .local(try SQLiteStore(directory: temporaryDirectory()))
        let service: TestService = Self.service(.require, pki: pki, store: store)
        try await service.test { client in
            var device = AttestingDevice(pki: pki, deviceId: "phone-1")
            let attested = try await device.attest(client)
            #expect(attested.status == .created, "\(String(buffer: attested.body))")
            let answer = try json(attested)
            #expect(answer["environment"] as? String == "production")
            #expect(answer["keyId"] as? String == device.keyId)

            for round in 0..<3 {
                let body = device.body([event("e\(round)", #""kind": "account", "status": "available""#)])
                let response = try await client.post(body, headers: try device.signed(body))
                #expect(response.status == .accepted, "upload \(round): \(String(buffer: response.body))")
            }
            let status = try json(try await client.get("/v1/devices/phone-1?appId=com.example.notes"))
            #expect(status["attested"] as? Bool == true)
            #expect((status["attestation"] as? [String: Any])?["environment"] as? String == "production")
            let summary = try json(try await client.get("/v1/summary?appId=com.example.notes"))
            #expect((summary["attestedDevices"] as? [String: Any])?["production"] as? Int == 1)
            #expect(summary["devices"] as? Int == 1)
        }
    }

    @Test("in require mode a forged fleet posting with the ingest key alone is refused and changes nothing")
    func forgedFleet() async throws {
        let pki = try StandInAppAttest(now: Self.pkiNow)
        let transport = RecordingTransport()
        let service = Self.service(.require, pki: pki, transport: transport)
        try await service.test { client in
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/std", "grouping": "device"}"#)
            var genuine = AttestingDevice(pki: pki, deviceId: "genuine")
            let attested = try await genuine.attest(client)
            #expect(attested.status == .created)
            let body = genuine.body(healthyEvents)
            let signedBody = try genuine.signed(body)
            #expect(try await client.post(body, headers: signedBody).status == .accepted)

            // 200 made-up devices of a "bad release", each breaking at once.
            for index in 0..<200 {
                let forged = batch(device: "forged-\(index)", [event("f\(index)", urgentError)])
                let response = try await client.post(forged)
                #expect(response.status == .unauthorized)
                #expect(try Self.problemType(response) == "attestation-required")
            }
            // A forger that attested one real install cannot sign for ids it makes up either.
            let stolen = batch(device: "forged-stolen", [event("s1", urgentError)])
            let reused = try await client.post(stolen, headers: try genuine.signed(stolen))
            #expect(reused.status == .unauthorized)
            #expect(try Self.problemType(reused) == "assertion-unknown-key")

            let summary = try json(try await client.get("/v1/summary"))
            #expect(summary["devices"] as? Int == 1, "only the genuine install is counted")
            #expect(summary["broken"] as? Int == 0)
            #expect(try await firing(client, kind: .syncError).isEmpty)
            let devices = try json(try await client.get("/v1/devices"))["data"] as? [[String: Any]] ?? []
            #expect(devices.map { $0["deviceId"] as? String } == ["genuine"])
            try await service.drained()
            #expect(transport.sent.withLock { $0.isEmpty }, "no webhook was sent for the forged fleet")

            // The same break from the genuine install is told: the path the forgeries were refused on works.
            let broken = genuine.body([event("g2", "2026-11-22T10:00:05Z", urgentError)])
            let signedBroken = try genuine.signed(broken)
            #expect(try await client.post(broken, headers: signedBroken).status == .accepted)
            #expect(try await eventually { transport.requests(to: "/std").count == 1 })
        }
    }

    @Test("in report mode unattested devices are accepted and shown as unattested")
    func reportMode() async throws {
        let pki = try StandInAppAttest(now: Self.pkiNow)
        let service: TestService = Self.service(.report, pki: pki)
        try await service.test { client in
            #expect(try await client.post(batch(device: "plain", healthyEvents)).status == .accepted)
            var device = AttestingDevice(pki: pki, deviceId: "signed")
            let attestedDevice = try await device.attest(client)
            #expect(attestedDevice.status == .created)
            let body = device.body(healthyEvents)
            let signedBody = try device.signed(body)
            #expect(try await client.post(body, headers: signedBody).status == .accepted)
            // A bad signature in report mode is counted as unattested, not refused.
            var other = body
            other.writeString(" ")
            let signedOther = try device.signed(body)
            #expect(try await client.post(other, headers: signedOther).status == .accepted)
            var garbled = HTTPFields()
            garbled.set("SyncHealth-Key-Id", "%%%")
            #expect(try await client.post(other, headers: garbled).status == .accepted, "unreadable headers too")
            #expect(try json(try await client.get("/v1/devices/plain?appId=com.example.notes"))["attested"] as? Bool == false)
            #expect(try json(try await client.get("/v1/devices/signed?appId=com.example.notes"))["attested"] as? Bool == true)
            let listed = try json(try await client.get("/v1/devices"))["data"] as? [[String: Any]] ?? []
            let attested = Dictionary(uniqueKeysWithValues: listed.map { ($0["deviceId"] as? String ?? "", $0["attested"] as? Bool) })
                .filter { $0.key != "other" }
            #expect(attested == ["plain": false, "signed": true], "lists carry it too")
            // Devices of apps that do not attest say nothing of it.
            #expect(try await client.post(batch(device: "other", app: "com.example.other", healthyEvents)).status == .accepted)

            // Releases count each version's attested devices, by the version of their last signed upload.
            func versioned(_ deviceId: String, _ version: String) -> ByteBuffer {
                let network = event("v-" + deviceId, #""kind": "network", "available": true"#)
                let device = #"{"deviceId": ""# + deviceId + #"", "appId": "com.example.notes", "appVersion": ""# + version + #""}"#
                return ByteBuffer(string: #"{"device": "# + device + #", "events": ["# + network + "]}")
            }
            #expect(try await client.post(versioned("plain", "2.0")).status == .accepted)
            let upgraded = versioned("signed", "2.0")
            let signedUpgrade = try device.signed(upgraded)
            #expect(try await client.post(upgraded, headers: signedUpgrade).status == .accepted)
            let releases = try json(try await client.get("/v1/releases?appId=com.example.notes"))["data"] as? [[String: Any]] ?? []
            let two = releases.first { $0["version"] as? String == "2.0" }
            #expect(two?["devices"] as? Int == 2)
            #expect(two?["attestedDevices"] as? Int == 1)
            #expect(try json(try await client.get("/v1/devices/other?appId=com.example.other"))["attested"] == nil)
            #expect(try json(try await client.get("/v1/summary?appId=com.example.other"))["attestedDevices"] == nil, "nor does its summary")
        }
    }

    @Test("in report mode an attestedOnly subscription hears of the genuine install only; the others hear of every device")
    func attestedOnlySubscription() async throws {
        let pki = try StandInAppAttest(now: Self.pkiNow)
        let transport = RecordingTransport()
        let service = Self.service(.report, pki: pki, transport: transport)
        try await service.test { client in
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/every", "grouping": "device"}"#)
            let created = try await client.execute(
                uri: "/v1/webhooks",
                method: .post,
                headers: SyncHealthServerTests.headers(adminKey),
                body: ByteBuffer(string: #"{"url": "http://127.0.0.1:9/attested", "grouping": "device", "attestedOnly": true}"#)
            )
            #expect(created.status == .created)
            #expect(try json(created)["attestedOnly"] as? Bool == true)
            let listed = try json(try await client.get("/v1/webhooks", key: adminKey))["data"] as? [[String: Any]] ?? []
            let asked = Dictionary(uniqueKeysWithValues: listed.map { ($0["url"] as? String ?? "", $0["attestedOnly"] as? Bool) })
            #expect(asked == ["http://127.0.0.1:9/every": nil, "http://127.0.0.1:9/attested": true], "shown only where asked")
            let fleetOnly = try await client.execute(
                uri: "/v1/webhooks",
                method: .post,
                headers: SyncHealthServerTests.headers(adminKey),
                body: ByteBuffer(string: #"{"url": "http://127.0.0.1:9/x", "kinds": ["fleetDegraded"], "attestedOnly": true}"#)
            )
            #expect(fleetOnly.status == .badRequest)

            var genuine = AttestingDevice(pki: pki, deviceId: "genuine")
            #expect(try await genuine.attest(client).status == .created)
            // A few: many devices breaking at once would be told as one fleet alert instead.
            for index in 0..<3 {
                let forged = batch(
                    device: "forged-\(index)",
                    [event("n\(index)", #""kind": "network", "available": true"#), event("f\(index)", urgentError)]
                )
                #expect(try await client.post(forged).status == .accepted)
            }
            let broken = genuine.body([event("n", #""kind": "network", "available": true"#), event("g1", urgentError)])
            let signedBroken = try genuine.signed(broken)
            #expect(try await client.post(broken, headers: signedBroken).status == .accepted)
            try await service.drained()
            #expect(transport.requests(to: "/every").count == 4)
            let told = transport.requests(to: "/attested").map { (($0.json as? [String: Any])?["data"] as? [String: Any])?["deviceId"] as? String }
            #expect(told == ["genuine"])
            #expect(try await client.get("/v1/incidents?attestedOnly=maybe").status == .badRequest)
        }
    }

    @Test("each bad attestation is refused with its own problem type and stores nothing")
    func badAttestations() async throws {
        let pki = try StandInAppAttest(now: Self.pkiNow)
        let stranger = try StandInAppAttest(now: Self.pkiNow)
        let service: TestService = Self.service(.require, pki: pki)
        try await service.test { client in
            let device = AttestingDevice(pki: pki, deviceId: "phone")
            let otherKey = StandInAppAttestKey(pki: pki, appIdentifier: Self.appIdentifier).parts().certifiedKey
            let cases: [(String, (inout StandInAppAttestKey.AttestationParts) -> Void, String)] = [
                ("another CA", { $0.issuerKey = stranger.intermediateKey }, "attestation-chain"),
                ("a nonce for another challenge", { $0.nonce = Array(repeating: 1, count: 32) }, "attestation-nonce"),
                ("another App ID", { $0.authenticatorData.rpIdHash = Array(repeating: 0, count: 32) }, "attestation-app-id"),
                ("a used key", { $0.authenticatorData.counter = 3 }, "attestation-counter"),
                ("a development key", { $0.authenticatorData.aaguid = AppAttestEnvironment.development.aaguid }, "attestation-environment"),
                ("another key's certificate", { $0.certifiedKey = otherKey }, "attestation-key-id"),
                ("not App Attest", { $0.fmt = "packed" }, "attestation-malformed"),
            ]
            for (name, tamper, type) in cases {
                let response = try await device.attest(client, tamper: tamper)
                #expect(response.status.code / 100 == 4, "\(name)")
                #expect(try Self.problemType(response) == type, "\(name): \(String(buffer: response.body))")
            }

            // Challenges: unknown, used, expired, another app's.
            let object = try device.key.attestation(challenge: Array(repeating: 5, count: 32))
            var response = try await Self.attest(
                client,
                appId: "com.example.notes",
                deviceId: "phone",
                keyId: device.keyId,
                attestation: object,
                challenge: Array(repeating: 5, count: 32)
            )
            #expect(try Self.problemType(response) == "attestation-challenge", "unknown")
            let challenge = try await Self.challenge(client, appId: "com.example.notes")
            let good = try device.key.attestation(challenge: challenge)
            #expect(
                try await Self.attest(
                    client,
                    appId: "com.example.notes",
                    deviceId: "phone",
                    keyId: device.keyId,
                    attestation: good,
                    challenge: challenge
                )
                .status == .created
            )
            response = try await Self.attest(
                client,
                appId: "com.example.notes",
                deviceId: "phone",
                keyId: device.keyId,
                attestation: good,
                challenge: challenge
            )
            #expect(try Self.problemType(response) == "attestation-challenge", "used")
            let late = try await Self.challenge(client, appId: "com.example.notes")
            service.clock.advance(by: .seconds(301))
            response = try await Self.attest(
                client,
                appId: "com.example.notes",
                deviceId: "phone2",
                keyId: device.keyId,
                attestation: try device.key.attestation(challenge: late),
                challenge: late
            )
            #expect(try Self.problemType(response) == "attestation-challenge", "expired")

            // Garbage: not base64, not CBOR, an app that does not attest.
            response = try await Self.attest(
                client,
                appId: "com.example.notes",
                deviceId: "phone",
                keyId: "%%%",
                attestation: [1],
                challenge: [1]
            )
            #expect(response.status == .badRequest)
            let fresh = try await Self.challenge(client, appId: "com.example.notes")
            response = try await Self.attest(
                client,
                appId: "com.example.notes",
                deviceId: "phone3",
                keyId: device.keyId,
                attestation: [0xA1, 0x01],
                challenge: fresh
            )
            #expect(try Self.problemType(response) == "attestation-malformed")
            let other = try await client.execute(
                uri: "/v1/attest/challenge",
                method: .post,
                headers: SyncHealthServerTests.headers(ingestKey),
                body: ByteBuffer(string: #"{"appId": "com.other"}"#)
            )
            #expect(other.status == .conflict)
            #expect(try Self.problemType(other) == "attestation-not-configured")
            #expect(try await service.store.attestation(of: DeviceKey(appId: "com.example.notes", deviceId: "phone2")) == nil)
            #expect(try await service.store.attestation(of: DeviceKey(appId: "com.example.notes", deviceId: "phone3")) == nil)
            #expect(try await service.store.attestedDevices(appId: nil) == ["production": 1], "only the one good attestation is kept")

            // Challenges never redeemed are cleared out as new ones are issued, once expired.
            for _ in 0..<3 { _ = try await Self.challenge(client, appId: "com.example.notes") }
            service.clock.advance(by: .seconds(301))
            _ = try await Self.challenge(client, appId: "com.example.notes")
            #expect(try await service.store.pruneChallenges(before: service.clock.now + .seconds(3600), limit: 100) == 1, "only the newest was left")
        }
    }

    @Test("each bad assertion is refused with its own problem type and applies nothing")
    func badAssertions() async throws {
        let pki = try StandInAppAttest(now: Self.pkiNow)
        let service: TestService = Self.service(.require, pki: pki)
        try await service.test { client in
            var device = AttestingDevice(pki: pki, deviceId: "phone")
            let attestedDevice = try await device.attest(client)
            #expect(attestedDevice.status == .created)
            var neighbour = AttestingDevice(pki: pki, deviceId: "neighbour")
            let attestedNeighbour = try await neighbour.attest(client)
            #expect(attestedNeighbour.status == .created)
            let body = device.body([event("x1", urgentError)])
            let signed = try device.signed(body)
            #expect(try await client.post(body, headers: signed).status == .accepted)

            var cases: [(String, ByteBuffer, HTTPFields, String)] = []
            cases.append(("the same request again", body, signed, "assertion-replayed"))
            let body2 = device.body([event("x2", urgentError)])
            let old = try device.key.assertion(clientData: Array(buffer: body2), counter: 1)
            cases.append(("an older counter", body2, Self.headers(keyId: device.keyId, assertion: old), "assertion-replayed"))
            var altered = body2
            altered.writeString(" ")
            cases.append(("another body than was signed", altered, try device.signed(body2), "assertion-signature"))
            cases.append(("the neighbour's key for this device", body2, try neighbour.signed(body2), "assertion-unknown-key"))
            cases.append(
                (
                    "a key never attested", body2, Self.headers(keyId: Data(repeating: 7, count: 32).base64EncodedString(), assertion: old),
                    "assertion-unknown-key"
                )
            )
            cases.append(("not CBOR", body2, Self.headers(keyId: device.keyId, assertion: [0xFF]), "assertion-malformed"))
            var half = HTTPFields()
            half.set("SyncHealth-Key-Id", device.keyId)
            cases.append(("a key id without an assertion", body2, half, "assertion-malformed"))
            for (name, body, headers, type) in cases {
                let response = try await client.post(body, headers: headers)
                #expect(response.status.code / 100 == 4, "\(name)")
                #expect(try Self.problemType(response) == type, "\(name): \(String(buffer: response.body))")
            }
            let status = try json(try await client.get("/v1/devices/phone?appId=com.example.notes"))
            #expect((status["lastSyncError"] as? [String: Any]) != nil, "the accepted upload was applied")
            let devices = try json(try await client.get("/v1/devices"))["data"] as? [[String: Any]] ?? []
            #expect(devices.count == 1, "nothing of the refused uploads was applied")
            // The device's next honestly signed upload still goes through.
            let next = device.body([event("x3", #""kind": "account", "status": "available""#)])
            let signedNext = try device.signed(next)
            #expect(try await client.post(next, headers: signedNext).status == .accepted)
        }
    }
}

@Suite("App Attest across PostgreSQL replicas, on the built binary", .serialized)
struct AppAttestReplicaTests {
    static let ingest = "attest-ingest-0123456789abcdefghijklmnop"
    static let read = "attest-read-0123456789abcdefghijklmnop"

    /// Two replicas of the built binary on a fresh PostgreSQL database, trusting `pki`'s root, with
    /// `com.example.notes` in `require` mode; ready.
    static func replicas(_ pki: StandInAppAttest, environment extra: [String: String]) async throws -> (LiveServer, LiveServer) {
        let rootFile = temporaryDirectory() + "/root.pem"
        try pki.rootPEM().write(toFile: rootFile, atomically: true, encoding: .utf8)
        let environment = [
            "SYNCHEALTH_DATABASE_URL": try await PostgresTesting.freshDatabase(),
            "SYNCHEALTH_INGEST_KEYS": ingest,
            "SYNCHEALTH_APP_ATTEST": "com.example.notes=\(AppAttestTests.appIdentifier):require",
            "SYNCHEALTH_APP_ATTEST_ROOT": rootFile,
        ].merging(extra) { $1 }
        let a = try LiveServer(environment: environment)
        let b = try LiveServer(environment: environment)
        try await a.waitUntilReady()
        try await b.waitUntilReady()
        return (a, b)
    }

    @Test(
        "a challenge from A is redeemed on B; a request accepted by A is refused as a replay by B; of one request sent to both at once, one is applied",
        .enabled(if: PostgresTesting.baseURL != nil)
    )
    func replicas() async throws {
        let pki = try StandInAppAttest()
        let (a, b) = try await Self.replicas(pki, environment: ["SYNCHEALTH_READ_KEYS": Self.read])
        defer {
            a.stop()
            b.stop()
        }

        var key = StandInAppAttestKey(pki: pki, appIdentifier: AppAttestTests.appIdentifier)
        let keyId = Data(key.keyId).base64EncodedString()
        let issued = try await a.request("POST", "/v1/attest/challenge", key: Self.ingest, body: Data(#"{"appId": "com.example.notes"}"#.utf8))
        #expect(issued.status == 201)
        let challengeText = try #require((try JSONSerialization.jsonObject(with: issued.body) as? [String: Any])?["challenge"] as? String)
        let challenge = Array(try #require(Data(base64Encoded: challengeText)))
        let attestation = Data(try key.attestation(challenge: challenge)).base64EncodedString()
        let attestBody = Data(
            #"{"appId": "com.example.notes", "deviceId": "phone", "keyId": "\#(keyId)", "attestation": "\#(attestation)", "challenge": "\#(challengeText)"}"#
                .utf8
        )
        let attested = try await b.request("POST", "/v1/attest", key: Self.ingest, body: attestBody)
        #expect(attested.status == 201, "B redeems A's challenge: \(String(decoding: attested.body, as: UTF8.self))")
        #expect(try await a.request("POST", "/v1/attest", key: Self.ingest, body: attestBody).status == 401, "and only once")

        func upload(_ id: String) throws -> (body: Data, headers: [String: String]) {
            let body = Data(String(buffer: batch(device: "phone", [event(id, #""kind": "account", "status": "available""#)])).utf8)
            let assertion = try key.assertion(clientData: Array(body))
            return (body, ["SyncHealth-Key-Id": keyId, "SyncHealth-Assertion": Data(assertion).base64EncodedString()])
        }
        let first = try upload("u1")
        #expect(try await a.request("POST", "/v1/events", key: Self.ingest, body: first.body, headers: first.headers).status == 202)
        let replay = try await b.request("POST", "/v1/events", key: Self.ingest, body: first.body, headers: first.headers)
        #expect(replay.status == 401)
        #expect(String(decoding: replay.body, as: UTF8.self).contains("assertion-replayed"))

        // The same signed request to both replicas at once: one applies it, the other refuses it.
        var statuses: [Int] = []
        for round in 0..<10 {
            let request = try upload("race-\(round)")
            async let onA = a.request("POST", "/v1/events", key: Self.ingest, body: request.body, headers: request.headers)
            async let onB = b.request("POST", "/v1/events", key: Self.ingest, body: request.body, headers: request.headers)
            let pair = [try await onA.status, try await onB.status].sorted()
            statuses += pair
            #expect(pair == [202, 401], "round \(round): \(pair)")
        }
        let forged = Data(String(buffer: batch(device: "forged", [event("f", urgentError)])).utf8)
        #expect(try await b.request("POST", "/v1/events", key: Self.ingest, body: forged).status == 401)
        let summary = try JSONSerialization.jsonObject(with: try await a.request("GET", "/v1/summary", key: Self.read).body) as? [String: Any]
        #expect(summary?["devices"] as? Int == 1)
        #expect((summary?["attestedDevices"] as? [String: Any])?["production"] as? Int == 1)
    }
}
