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
    static let ingest = "attest-ingest-0123456789abcdef"
    static let read = "attest-read-0123456789abcdef"

    static func server(_ pki: StandInAppAttest, mode: String?) throws -> LiveServer {
        let rootFile = temporaryDirectory() + "/root.pem"
        try pki.rootPEM().write(toFile: rootFile, atomically: true, encoding: .utf8)
        var environment = ["SYNCHEALTH_INGEST_KEYS": ingest, "SYNCHEALTH_READ_KEYS": read, "SYNCHEALTH_APP_ATTEST_ROOT": rootFile]
        if let mode { environment["SYNCHEALTH_APP_ATTEST"] = "com.example.notes=\(AppAttestTests.appIdentifier):\(mode)" }
        return try LiveServer(environment: environment)
    }

    static func reporter(_ server: LiveServer, _ provider: SoftwareAppAttest, deviceId: String, directory: URL) throws -> SyncHealthReporter {
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

    @Test("in require mode the reporter attests once, signs every upload, and a restart reuses the attested key")
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
        #expect(provider.calls.withLock { $0 } == ["generateKey", "attestKey"] + Array(repeating: "generateAssertion", count: 4))
        let status = try await Self.status(server, "phone")
        #expect(status["attested"] as? Bool == true)
        #expect(status["accountStatus"] as? String == "available", "the upload after the restart was applied")
    }

    @Test("a key the platform no longer knows is replaced and attested anew; nothing recorded is lost")
    func invalidKey() async throws {
        let pki = try StandInAppAttest()
        let server = try Self.server(pki, mode: "require")
        defer { server.stop() }
        try await server.waitUntilReady()
        let provider = SoftwareAppAttest(pki: pki)
        let reporter = try Self.reporter(server, provider, deviceId: "reinstalled", directory: URL(fileURLWithPath: temporaryDirectory()))
        reporter.record(.network(available: true))
        try await reporter.flush()
        provider.invalidateNext.withLock { $0 = true }
        reporter.record(.account(status: .available))
        await #expect(throws: SyncHealthReporterError.self) { try await reporter.flush() }
        #expect(reporter.delivery.queuedEvents == 1, "the event waits in the queue")
        try await Task.sleep(for: .milliseconds(100))
        try await reporter.flush()
        await reporter.shutdown()
        #expect(provider.calls.withLock { $0 }.filter { $0 == "attestKey" }.count == 2)
        #expect(reporter.delivery.queuedEvents == 0)
        #expect(try await Self.status(server, "reinstalled")["accountStatus"] as? String == "available")
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

    @Test("for an app the server does not attest, the reporter sends unsigned after one challenge")
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
        #expect(provider.calls.withLock { $0 } == ["generateKey"])
        #expect(try await Self.status(server, "plain")["isNetworkAvailable"] as? Bool == true)
    }
}
