import Foundation
import SyncHealthClient
import SyncHealthTestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
import SyncHealthEngineTesting
#endif

/// A reporter of the client package pointed at a live server, with a queue of its own.
func liveReporter(_ server: LiveServer, key: String, deviceId: String, port: Int? = nil, batchSize: Int = 100) throws -> SyncHealthReporter {
    var configuration = SyncHealthReporter.Configuration(
        endpoint: URL(string: "http://127.0.0.1:\(port ?? server.port)")!,
        ingestKey: key,
        appId: "com.example.notes",
        containerId: "iCloud.com.example.notes",
        deviceId: deviceId,
        storageDirectory: URL(fileURLWithPath: temporaryDirectory())
    )
    configuration.heartbeatOnStart = false
    configuration.observesNetworkAndAccount = false
    configuration.sendInterval = .seconds(3600)
    configuration.batchSize = batchSize
    configuration.log = { _ in }
    return try SyncHealthReporter(configuration: configuration)
}

/// Runs `synchealth simulate` with `arguments`; returns the child (still running when `wait` is false).
func simulate(_ arguments: [String], output: Pipe = Pipe(), wait: Bool = true) throws -> Process {
    let process = Process()
    process.executableURL = builtBinary()
    process.arguments = ["simulate"] + arguments
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    if wait { process.waitUntilExit() }
    return process
}

/// The number in "queued: N events not yet delivered" of simulate's output.
func queuedCount(_ output: Pipe) -> Int? {
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    guard let range = text.range(of: "queued: ") else { return nil }
    return Int(text[range.upperBound...].prefix { $0.isNumber })
}

@Suite("Client package against the live server", .serialized)
struct ClientEndToEndTests {
    @Test("scripted breakages give the same summary on the server as the reporter's local state")
    func sameSummary() async throws {
        let server = try LiveServer(environment: [
            "SYNCHEALTH_INGEST_KEYS": "in-0123456789abcdefghijklmnop", "SYNCHEALTH_READ_KEYS": "read-0123456789abcdefghijklmnop",
        ])
        defer { server.stop() }
        try await server.waitUntilReady()
        let healthy: [SyncEvent] = [
            .account(status: .available), .network(available: true), .activity(phase: .setup, state: .succeeded),
            .activity(phase: .import, state: .succeeded), .activity(phase: .export, state: .succeeded),
        ]
        let scenarios: [(String, [SyncEvent], SyncStateSummary)] = [
            ("healthy", healthy, .succeeded),
            ("quota", healthy + [.activity(phase: .export, state: .failed, error: SyncErrorReport(domain: "CKErrorDomain", code: 25))], .error),
            ("network-lost", healthy + [.network(available: false)], .noNetwork),
            ("signed-out", healthy + [.account(status: .noAccount)], .accountNotAvailable),
            (
                "zone-deleted", healthy + [.activity(phase: .import, state: .failed, error: SyncErrorReport(domain: "CKErrorDomain", code: 26))],
                .error
            ),
            ("not-syncing", Array(healthy.prefix(3)), .notSyncing),
            ("syncing", healthy + [.activity(phase: .import, state: .started)], .inProgress),
        ]
        for (name, events, expected) in scenarios {
            let reporter = try liveReporter(server, key: "in-0123456789abcdefghijklmnop", deviceId: name)
            var at = Date().addingTimeInterval(-10)
            for event in events {
                reporter.record(event, at: at)
                at += 0.01
            }
            try await reporter.flush()
            let body = try await server.request("GET", "/v1/devices/\(name)?appId=com.example.notes", key: "read-0123456789abcdefghijklmnop").body
            let status = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
            #expect(reporter.syncStateSummary == expected, "\(name) on the phone")
            #expect(status["syncStateSummary"] as? String == reporter.syncStateSummary.rawValue, "\(name) on the server")
            #expect(status["isBroken"] as? Bool == reporter.isBroken)
            #expect(status["isNotSyncing"] as? Bool == reporter.isNotSyncing)
            #expect(status["symbolName"] as? String == reporter.status.symbolName)
            await reporter.shutdown()
        }
    }

    @Test("an export that keeps failing with changes pending fires exportAtRisk on the server")
    func exportAtRisk() async throws {
        let server = try LiveServer(environment: [
            "SYNCHEALTH_INGEST_KEYS": "in-0123456789abcdefghijklmnop", "SYNCHEALTH_READ_KEYS": "read-0123456789abcdefghijklmnop",
            "SYNCHEALTH_EXPORT_AT_RISK_AFTER": "1s",
        ])
        defer { server.stop() }
        try await server.waitUntilReady()
        let reporter = try liveReporter(server, key: "in-0123456789abcdefghijklmnop", deviceId: "at-risk")
        let now = Date()
        for event: SyncEvent in [
            .account(status: .available), .network(available: true), .activity(phase: .setup, state: .succeeded),
            .activity(phase: .import, state: .succeeded),
        ] {
            reporter.record(event, at: now.addingTimeInterval(-5))
        }
        reporter.record(.pending(count: 3, oldestPendingAt: now.addingTimeInterval(-4)), at: now.addingTimeInterval(-4))
        reporter.record(.activity(phase: .export, state: .failed, error: SyncErrorReport(domain: "CKErrorDomain", code: 4)), at: now)
        try await reporter.flush()
        let fired = try await eventually(tries: 100, every: .milliseconds(100)) {
            let body = try await server.request("GET", "/v1/alerts?state=firing&kind=exportAtRisk", key: "read-0123456789abcdefghijklmnop").body
            return String(decoding: body, as: UTF8.self).contains(#""deviceId":"at-risk""#)
        }
        #expect(fired)
        await reporter.shutdown()
    }

    @Test("with the server stopped for a while the events stay queued; back, every event arrives and none is applied twice")
    func serverDownThenBack() async throws {
        let environment = ["SYNCHEALTH_INGEST_KEYS": "in-0123456789abcdefghijklmnop", "SYNCHEALTH_READ_KEYS": "read-0123456789abcdefghijklmnop"]
        let first = try LiveServer(environment: environment)
        try await first.waitUntilReady()
        let port = first.port
        let reporter = try liveReporter(first, key: "in-0123456789abcdefghijklmnop", deviceId: "outage")
        reporter.record(.account(status: .available))
        reporter.record(.network(available: true))
        try await reporter.flush()
        #expect(first.stop() == 0)

        reporter.record(.activity(phase: .setup, state: .succeeded))
        reporter.record(.activity(phase: .import, state: .succeeded))
        await #expect(throws: SyncHealthReporterError.self) { try await reporter.flush() }
        #expect(reporter.delivery.queuedEvents == 2)

        let second = try LiveServer(dataDirectory: first.dataDirectory, port: port, environment: environment)
        defer { second.stop() }
        try await second.waitUntilReady()
        reporter.record(.activity(phase: .export, state: .succeeded))
        try await reporter.flush()
        #expect(reporter.delivery.queuedEvents == 0)
        #expect(try await second.metric(#"synchealth_events_total{result="accepted"}"#) == 3, "the two queued during the outage and the new one")
        #expect(try await second.metric(#"synchealth_events_total{result="duplicate"}"#) == 0)
        let body = try await second.request("GET", "/v1/devices/outage?appId=com.example.notes", key: "read-0123456789abcdefghijklmnop").body
        #expect(String(decoding: body, as: UTF8.self).contains(#""syncStateSummary":"succeeded""#))
        await reporter.shutdown()
    }

    @Test("a reporter over the device rate limit waits as 429's Retry-After says, then delivers everything")
    func rateLimitHonoured() async throws {
        let server = try LiveServer(environment: ["SYNCHEALTH_INGEST_KEYS": "in-0123456789abcdefghijklmnop", "SYNCHEALTH_DEVICE_RATE_LIMIT": "2/1"])
        defer { server.stop() }
        try await server.waitUntilReady()
        let reporter = try liveReporter(server, key: "in-0123456789abcdefghijklmnop", deviceId: "eager", batchSize: 5)
        for i in 0..<20 { reporter.record(.pending(count: i)) }
        var waits = 0
        while true {
            do {
                try await reporter.flush()
                break
            } catch SyncHealthReporterError.rateLimited(let after) {
                #expect(after > .zero)
                waits += 1
                try await Task.sleep(for: after)
            }
        }
        #expect(waits >= 1)
        #expect(try await server.metric(#"synchealth_events_total{result="accepted"}"#) == 20)
        #expect(try await server.metric(#"synchealth_events_total{result="duplicate"}"#) == 0)
        await reporter.shutdown()
    }

    @Test("a simulator killed with SIGKILL during a flush loses nothing: the next start delivers the rest, each applied once")
    func killDuringFlush() async throws {
        let storage = temporaryDirectory()
        // Offline first: every event is recorded into the queues, none delivered (nothing listens on port 1).
        let offline = Pipe()
        _ = try simulate(
            [
                "--url", "http://127.0.0.1:1", "--key", "in-0123456789abcdefghijklmnop", "--devices", "3", "--rounds", "12", "--broken-share", "0.5",
                "--storage", storage, "--duration", "60",
            ],
            output: offline
        )
        let recorded = try #require(queuedCount(offline))
        #expect(recorded > 50)

        // Back online against a server that allows each device 2 requests a second: the drain takes seconds, and
        // is killed in the middle.
        let server = try LiveServer(environment: ["SYNCHEALTH_INGEST_KEYS": "in-0123456789abcdefghijklmnop", "SYNCHEALTH_DEVICE_RATE_LIMIT": "2/1"])
        defer { server.stop() }
        try await server.waitUntilReady()
        let accepted = #"synchealth_events_total{result="accepted"}"#
        let drainArguments = [
            "--url", "http://127.0.0.1:\(server.port)", "--key", "in-0123456789abcdefghijklmnop", "--devices", "3", "--storage", storage,
            "--drain", "--batch-size", "4", "--duration", "60",
        ]
        let child = try simulate(drainArguments, wait: false)
        var before = 0.0
        for _ in 0..<600 where before < 12 {
            before = try await server.metric(accepted)
            try await Task.sleep(for: .milliseconds(10))
        }
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        #expect(child.terminationReason == .uncaughtSignal)
        #expect(before >= 12 && Int(before) < recorded, "killed after some batches and before the last")

        let rest = Pipe()
        _ = try simulate(drainArguments, output: rest)
        #expect(queuedCount(rest) == 0)
        #expect(try await server.metric(accepted) == Double(recorded), "every recorded event applied exactly once")
        let duplicates = try await server.metric(#"synchealth_events_total{result="duplicate"}"#)
        #expect(duplicates <= 3 * 4, "at most the batch in flight per device is sent again")
    }
}

@Suite("Simulator: a bad release", .serialized)
struct SimulatedReleaseTests {
    @Test("simulate --bad-release 1.3 plays a rollout that breaks: GET /v1/releases names 1.3 a regression of 1.2")
    func badRelease() async throws {
        let server = try LiveServer(environment: [
            "SYNCHEALTH_INGEST_KEYS": "in-0123456789abcdefghijklmnop", "SYNCHEALTH_READ_KEYS": "read-0123456789abcdefghijklmnop",
        ])
        defer { server.stop() }
        try await server.waitUntilReady()
        _ = try simulate([
            "--url", "http://127.0.0.1:\(server.port)", "--key", "in-0123456789abcdefghijklmnop", "--devices", "400", "--rounds", "2", "--duration",
            "60",
            "--broken-share", "0.02", "--app-versions", "1.1,1.2", "--bad-release", "1.3", "--app-id", "com.example.sim",
        ])
        let response = try await server.request("GET", "/v1/releases?appId=com.example.sim", key: "read-0123456789abcdefghijklmnop")
        let body = try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
        let data = try #require(body["data"] as? [[String: Any]])
        #expect(data.map { $0["version"] as? String } == ["1.3", "1.2", "1.1"])
        let bad = try #require(data.first)
        #expect((bad["regression"] as? [String: Any])?["previous"] as? String == "1.2")
        let top = try #require((bad["topErrors"] as? [[String: Any]])?.first)
        #expect(top["name"] as? String == "serverRejectedRequest")
        #expect(data.dropFirst().allSatisfy { $0["regression"] is NSNull })
    }
}
