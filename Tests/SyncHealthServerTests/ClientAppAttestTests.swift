import Foundation
import SyncHealthAttest
import SyncHealthAttestTesting
import SyncHealthClient
import SyncHealthTestSupport
import Synchronization
import Testing

/// `DCAppAttestService` in software: the stand-in PKI's keys, handed to the reporter as its App Attest provider, so
/// that the reporter runs the real protocol against the built server.
final class SoftwareAppAttest: AppAttestProvider {
    let pki: StandInAppAttest
    let supported: Bool
    private let keys = Mutex<[String: StandInAppAttestKey]>([:])
    /// Calls made, by method: what a test counts.
    let calls = Mutex<[String]>([])
    /// The next assertion fails as a reinstalled app's would (`DCError.invalidKey`).
    let invalidateNext = Mutex(false)

    init(pki: StandInAppAttest, supported: Bool = true) {
        self.pki = pki
        self.supported = supported
    }

    var isSupported: Bool { supported }

    func generateKey() async throws -> String {
        calls.withLock { $0.append("generateKey") }
        let key = StandInAppAttestKey(pki: pki, appIdentifier: AppAttestTests.appIdentifier)
        let id = Data(key.keyId).base64EncodedString()
        keys.withLock { $0[id] = key }
        return id
    }

    func attestKey(_ keyId: String, clientData: Data) async throws -> Data {
        calls.withLock { $0.append("attestKey") }
        guard let key = keys.withLock({ $0[keyId] }) else { throw AppAttestInvalidKey() }
        return Data(try key.attestation(challenge: Array(clientData)))
    }

    func generateAssertion(_ keyId: String, clientData: Data) async throws -> Data {
        calls.withLock { $0.append("generateAssertion") }
        if invalidateNext.withLock({ flag in
            defer { flag = false }
            return flag
        }) {
            keys.withLock { $0[keyId] = nil }
            throw AppAttestInvalidKey()
        }
        return try keys.withLock { keys in
            guard var key = keys[keyId] else { throw AppAttestInvalidKey() }
            let assertion = try key.assertion(clientData: Array(clientData))
            keys[keyId] = key
            return Data(assertion)
        }
    }
}

@Suite("The client package attests and signs against the built server", .serialized)
struct ClientAppAttestTests {
    static let ingest = "attest-ingest-0123456789abcdefghijklmnop"
    static let read = "attest-read-0123456789abcdefghijklmnop"

    static let admin = "attest-admin-0123456789abcdefghijklmnop"

    static func server(
        _ pki: StandInAppAttest,
        mode: String?,
        appIdentifier: String = AppAttestTests.appIdentifier,
        dataDirectory: String? = nil
    ) throws -> LiveServer {
        let rootFile = temporaryDirectory() + "/root.pem"
        try pki.rootPEM().write(toFile: rootFile, atomically: true, encoding: .utf8)
        var environment = [
            "SYNCHEALTH_INGEST_KEYS": ingest, "SYNCHEALTH_READ_KEYS": read, "SYNCHEALTH_ADMIN_KEYS": admin, "SYNCHEALTH_APP_ATTEST_ROOT": rootFile,
        ]
        if let mode { environment["SYNCHEALTH_APP_ATTEST"] = "com.example.notes=\(appIdentifier):\(mode)" }
        return try LiveServer(dataDirectory: dataDirectory ?? temporaryDirectory(), environment: environment)
    }

    static func reporter(_ server: LiveServer, _ provider: SoftwareAppAttest, deviceId: String?, directory: URL) throws -> SyncHealthReporter {
        var configuration = SyncHealthReporter.Configuration(
            endpoint: URL(string: "http://127.0.0.1:\(server.port)") ?? URL(fileURLWithPath: "/"),
            ingestKey: ingest,
            appId: "com.example.notes",
            deviceId: deviceId,
            storageDirectory: directory,
            appAttest: .provider(provider)
        )
        configuration.heartbeatOnStart = false
        configuration.observesNetworkAndAccount = false
        configuration.sendInterval = .seconds(3600)
        configuration.minimumRetryDelay = .milliseconds(10)
        configuration.maximumRetryDelay = .milliseconds(50)
        configuration.log = { _ in }
        return try SyncHealthReporter(configuration: configuration)
    }

    static func status(_ server: LiveServer, _ deviceId: String) async throws -> [String: Any] {
        let body = try await server.request("GET", "/v1/devices/\(deviceId)?appId=com.example.notes", key: read).body
        return try JSONSerialization.jsonObject(with: body) as? [String: Any] ?? [:]
    }

    @Test("in require mode the reporter attests once, proves its key once for a token, and a restart reuses both")
    func attestsOnce() async throws {
        let pki = try StandInAppAttest()
        let server = try Self.server(pki, mode: "require")
        defer { server.stop() }
        try await server.waitUntilReady()
        let provider = SoftwareAppAttest(pki: pki)
        let directory = URL(fileURLWithPath: temporaryDirectory())
        var reporter = try Self.reporter(server, provider, deviceId: "phone", directory: directory)
        for round in 0..<3 {
            reporter.record(.network(available: round % 2 == 0))
            try await reporter.flush()
        }
        await reporter.shutdown()
        reporter = try Self.reporter(server, provider, deviceId: "phone", directory: directory)
        reporter.record(.account(status: .available))
        try await reporter.flush()
        await reporter.shutdown()
        #expect(provider.calls.withLock { $0 } == ["generateKey", "attestKey", "generateAssertion"])
        let status = try await Self.status(server, "phone")
        #expect(status["attested"] as? Bool == true)
        #expect(status["accountStatus"] as? String == "available", "the upload after the restart was applied")
    }

    @Test("a key the platform no longer knows is replaced under a new device id (the old id stays bound to the lost key); nothing is lost")
    func invalidKey() async throws {
        let pki = try StandInAppAttest()
        let server = try Self.server(pki, mode: "require")
        defer { server.stop() }
        try await server.waitUntilReady()
        let provider = SoftwareAppAttest(pki: pki)
        let directory = URL(fileURLWithPath: temporaryDirectory())
        let reporter = try Self.reporter(server, provider, deviceId: nil, directory: directory)
        reporter.record(.network(available: true))
        try await reporter.flush()
        let first = try await reporter.deviceId()
        // The platform loses the key; the token runs out, and its refresh finds the key gone.
        provider.invalidateNext.withLock { $0 = true }
        try Self.expireToken(in: directory)
        reporter.record(.account(status: .available))
        // The lost key's upload goes unsigned and the server (require) refuses it: kept in the queue.
        await #expect(throws: SyncHealthReporterError.self) { try await reporter.flush() }
        #expect(reporter.delivery.queuedEvents == 1, "the event waits in the queue")
        try await Task.sleep(for: .milliseconds(100))
        try await reporter.flush()
        await reporter.shutdown()
        let second = try await reporter.deviceId()
        #expect(second != first, "a new device id for the new key")
        #expect(provider.calls.withLock { $0 }.filter { $0 == "attestKey" }.count == 2)
        #expect(reporter.delivery.queuedEvents == 0)
        #expect(try await Self.status(server, second)["accountStatus"] as? String == "available")
        #expect(try await Self.status(server, first)["isNetworkAvailable"] as? Bool == true, "what the old id sent stays")
    }

    @Test("the reporter takes a device token after attesting and sends it instead of an assertion; refreshes it when refused")
    func tokens() async throws {
        let pki = try StandInAppAttest()
        let server = try Self.server(pki, mode: "require")
        defer { server.stop() }
        try await server.waitUntilReady()
        let provider = SoftwareAppAttest(pki: pki)
        let directory = URL(fileURLWithPath: temporaryDirectory())
        let reporter = try Self.reporter(server, provider, deviceId: "tokened", directory: directory)
        for round in 0..<4 {
            reporter.record(.network(available: round % 2 == 0))
            try await reporter.flush()
        }
        // One assertion for the token; then every upload carries the token.
        #expect(provider.calls.withLock { $0 } == ["generateKey", "attestKey", "generateAssertion"])
        // The device erased on the server: its token is refused, and the reporter attests a new key and goes on.
        #expect(try await server.request("DELETE", "/v1/devices/tokened?appId=com.example.notes", key: Self.admin).status == 204)
        reporter.record(.account(status: .available))
        for _ in 0..<6 {
            do {
                try await reporter.flush()
                break
            } catch {
                try await Task.sleep(for: .milliseconds(60))
            }
        }
        await reporter.shutdown()
        #expect(reporter.delivery.queuedEvents == 0)
        #expect(provider.calls.withLock { $0 }.filter { $0 == "attestKey" }.count == 2)
        #expect(try await Self.status(server, "tokened")["accountStatus"] as? String == "available")
    }

    @Test(
        "against a server that refuses every attestation (wrong Team ID): report mode gets every event unsigned, one key a launch",
        arguments: ["report", "require"]
    )
    func misconfiguredServer(mode: String) async throws {
        let pki = try StandInAppAttest()
        let directory = URL(fileURLWithPath: temporaryDirectory())
        let provider = SoftwareAppAttest(pki: pki)
        // The server expects another Team ID: every attestation fails at the App ID step.
        let wrong = try Self.server(pki, mode: mode, appIdentifier: "ZZZZZ99999.com.example.notes")
        defer { _ = wrong.stop() }
        try await wrong.waitUntilReady()
        var reporter = try Self.reporter(wrong, provider, deviceId: "misconfigured", directory: directory)
        for round in 0..<6 {
            reporter.record(.network(available: round % 2 == 0))
            if mode == "report" {
                try await reporter.flush()
            } else {
                try? await reporter.flush()
                try await Task.sleep(for: .milliseconds(60))
            }
        }
        await reporter.shutdown()
        #expect(provider.calls.withLock { $0 }.filter { $0 == "generateKey" }.count == 1, "one key in the launch")
        if mode == "report" {
            #expect(reporter.delivery.queuedEvents == 0, "every event arrived, unsigned")
            #expect(try await Self.status(wrong, "misconfigured")["attested"] as? Bool == false)
            // The next launch makes at most one more key the same day: none, a refusal was seen less than a day ago.
            reporter = try Self.reporter(wrong, provider, deviceId: "misconfigured", directory: directory)
            reporter.record(.network(available: true))
            try await reporter.flush()
            await reporter.shutdown()
            #expect(provider.calls.withLock { $0 }.filter { $0 == "generateKey" }.count == 1, "not two keys in a day")
            return
        }
        #expect(reporter.delivery.queuedEvents == 6, "refused, nothing dropped")
        #expect(reporter.delivery.droppedEvents == 0)
        _ = wrong.stop()
        // The server fixed: the next launch (the refusal was seen in the last one) attests and delivers everything.
        let fixed = try Self.server(pki, mode: mode, dataDirectory: wrong.dataDirectory)
        defer { fixed.stop() }
        try await fixed.waitUntilReady()
        try Self.forgetRefusal(in: directory)
        reporter = try Self.reporter(fixed, provider, deviceId: "misconfigured", directory: directory)
        try await reporter.flush()
        await reporter.shutdown()
        #expect(reporter.delivery.queuedEvents == 0, "delivery resumed")
        #expect(try await Self.status(fixed, "misconfigured")["attested"] as? Bool == true)
    }

    /// Makes the reporter's device token expire, as an hour passing would.
    static func expireToken(in directory: URL) throws {
        let url = directory.appendingPathComponent("app-attest-key.json")
        var record = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any] ?? [:]
        #expect(record["token"] != nil)
        record["tokenExpiresAt"] = 0
        try JSONSerialization.data(withJSONObject: record).write(to: url)
    }

    /// Moves the last refusal a day back in the reporter's record (the one-key-a-day rule), as a day passing would.
    static func forgetRefusal(in directory: URL) throws {
        let url = directory.appendingPathComponent("app-attest-key.json")
        var record = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any] ?? [:]
        for field in ["refusedAt", "keyMadeAt"] {
            if let seconds = record[field] as? Double { record[field] = seconds - 86_401 }
        }
        try JSONSerialization.data(withJSONObject: record).write(to: url)
    }

    @Test("a device that cannot attest posts unsigned: shown as not attested in report mode, held in its queue in require mode")
    func unsupported() async throws {
        let pki = try StandInAppAttest()
        for mode in ["report", "require"] {
            let server = try Self.server(pki, mode: mode)
            defer { server.stop() }
            try await server.waitUntilReady()
            let provider = SoftwareAppAttest(pki: pki, supported: false)
            let reporter = try Self.reporter(server, provider, deviceId: "simulator", directory: URL(fileURLWithPath: temporaryDirectory()))
            reporter.record(.network(available: true))
            if mode == "report" {
                try await reporter.flush()
                #expect(try await Self.status(server, "simulator")["attested"] as? Bool == false)
            } else {
                await #expect(throws: SyncHealthReporterError.self) { try await reporter.flush() }
                #expect(reporter.delivery.queuedEvents == 1, "refused, not dropped")
            }
            await reporter.shutdown()
            #expect(provider.calls.withLock { $0 }.isEmpty, "nothing is asked of an unsupported device")
        }
    }

    @Test("for an app the server does not attest, the reporter sends unsigned after one challenge, and makes no key")
    func notConfigured() async throws {
        let pki = try StandInAppAttest()
        let server = try Self.server(pki, mode: nil)
        defer { server.stop() }
        try await server.waitUntilReady()
        let provider = SoftwareAppAttest(pki: pki)
        let reporter = try Self.reporter(server, provider, deviceId: "plain", directory: URL(fileURLWithPath: temporaryDirectory()))
        for _ in 0..<2 {
            reporter.record(.network(available: true))
            try await reporter.flush()
        }
        await reporter.shutdown()
        #expect(provider.calls.withLock { $0 }.isEmpty)
        #expect(try await Self.status(server, "plain")["isNetworkAvailable"] as? Bool == true)
    }
}
