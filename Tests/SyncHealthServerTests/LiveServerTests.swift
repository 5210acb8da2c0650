import Foundation
import SyncHealthTestSupport
import Synchronization
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
import SyncHealthEngineTesting
#endif

/// The built `synchealth` binary, next to the test bundle.
func builtBinary() -> URL {
    URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("synchealth")
}

/// A shareable, locked string.
final class LogBuffer: Sendable {
    let text = Mutex("")

    /// Appends what `handle` gives until its end, read on a thread of its own. Not Foundation's
    /// `readabilityHandler`, whose dispatch read sources are one kind fewer in the test process: a CI run crashed
    /// in libdispatch's event loop (a bad pointer in `_dispatch_event_loop_drain`), as swift-subprocess#47 did with
    /// DispatchIO on Linux.
    func drain(_ handle: FileHandle) {
        Thread { [self] in
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { return }
                text.withLock { $0 += String(decoding: chunk, as: UTF8.self) }
            }
        }
        .start()
    }
}

/// A `synchealth serve` process on a free loopback port, with its own data directory.
final class LiveServer: @unchecked Sendable {
    let process: Process
    let port: Int
    let dataDirectory: String
    private let errorPipe: Pipe
    /// Everything the server wrote to stderr.
    let captured = LogBuffer()

    struct StartFailed: Error, CustomStringConvertible { let description: String }

    /// Starts the server on `requested`, or, with 0, on a free port below the kernel's ephemeral range (32768 and
    /// up): some tests restart a server on its old port, which a process bound to "any port" meanwhile could take.
    init(dataDirectory: String = temporaryDirectory(), port requested: Int = 0, environment extra: [String: String] = [:]) throws {
        self.dataDirectory = dataDirectory
        var attempt = 0
        while true {
            attempt += 1
            let port = requested != 0 ? requested : attempt < 20 ? Int.random(in: 20_000..<32_000) : 0
            do {
                let launched = try Self.launch(port: port, dataDirectory: dataDirectory, environment: extra)
                (process, errorPipe, self.port) = (launched.process, launched.pipe, launched.port)
                captured.text.withLock { $0 = launched.log }
                break
            } catch let failure as StartFailed where requested == 0 && attempt < 20 && failure.description.contains("in use") {
                continue
            }
        }
        // Keep draining stderr so that the server never blocks on a full pipe, and keep what it logged.
        captured.drain(errorPipe.fileHandleForReading)
    }

    /// Runs `synchealth serve` on `port` until it logs the port it bound.
    private static func launch(
        port: Int,
        dataDirectory: String,
        environment extra: [String: String]
    ) throws -> (process: Process, pipe: Pipe, port: Int, log: String) {
        let binary = builtBinary()
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw StartFailed(description: "\(binary.path) is missing: run `swift build` before the tests")
        }
        let process = Process()
        let errorPipe = Pipe()
        process.executableURL = binary
        process.arguments = ["serve", "--port", String(port)]
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("SYNCHEALTH_") }
        environment["SYNCHEALTH_DATA_DIR"] = dataDirectory
        environment.merge(extra) { $1 }
        process.environment = environment
        process.standardError = errorPipe
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        // The server logs the port it bound: "Server started and listening on 127.0.0.1:PORT".
        var log = ""
        let deadline = Date().addingTimeInterval(30)
        var found: Int?
        while found == nil, Date() < deadline, process.isRunning {
            let chunk = errorPipe.fileHandleForReading.availableData
            if chunk.isEmpty {
                Thread.sleep(forTimeInterval: 0.02)
                continue
            }
            log += String(decoding: chunk, as: UTF8.self)
            if let range = log.range(of: "listening on 127.0.0.1:") {
                found = Int(log[range.upperBound...].prefix { $0.isNumber })
            }
        }
        guard let found else {
            process.terminate()
            // What is left of the log: the reason, "Address already in use" among them.
            log += String(decoding: errorPipe.fileHandleForReading.availableData, as: UTF8.self)
            throw StartFailed(description: "the server did not start: \(log)")
        }
        return (process, errorPipe, found, log)
    }

    /// Sends SIGTERM and waits for the process to exit; returns its status.
    @discardableResult
    func stop() -> Int32 {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Waits (a few seconds at most) until `/readyz` passes: the port opens while the engine still loads its state.
    func waitUntilReady() async throws {
        guard try await eventually(tries: 500, every: .milliseconds(20), { try await request("GET", "/readyz").status == 200 }) else {
            throw StartFailed(description: "the server never became ready")
        }
    }

    /// The value of a counter or gauge in `/metrics` (0 when absent).
    func metric(_ series: String) async throws -> Double {
        let text = String(decoding: try await request("GET", "/metrics").body, as: UTF8.self)
        for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1)) ?? 0
        }
        return 0
    }

    /// One HTTP request.
    func request(
        _ method: String,
        _ path: String,
        key: String? = nil,
        body: Data? = nil,
        headers: [String: String] = [:]
    ) async throws -> (status: Int, body: Data, headers: [String: String]) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        request.httpBody = body
        if let key { request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization") }
        if body != nil { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as? HTTPURLResponse
        var fields: [String: String] = [:]
        for (name, value) in http?.allHeaderFields ?? [:] { fields["\(name)".lowercased()] = "\(value)" }
        return (http?.statusCode ?? 0, data, fields)
    }
}

@Suite("Live: the built binary over real HTTP", .serialized)
struct LiveServerTests {
    @Test("with no configuration it generates keys, serves the contract, and stops cleanly on SIGTERM")
    func zeroConfiguration() async throws {
        let server = try LiveServer()
        let keysPath = server.dataDirectory + "/generated-keys.json"
        let attributes = try FileManager.default.attributesOfItem(atPath: keysPath)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let keys = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: keysPath))) as? [String: String])
        let ingest = try #require(keys["ingestKey"])
        let admin = try #require(keys["adminKey"])

        try await server.waitUntilReady()
        let body = Data(
            #"{"device": {"deviceId": "live-1", "appId": "com.example"}, "events": [{"eventId": "a", "occurredAt": "2026-11-22T10:00:00Z", "kind": "network", "available": true}]}"#
                .utf8
        )
        let posted = try await server.request("POST", "/v1/events", key: ingest, body: body)
        #expect(posted.status == 202)
        #expect(try await server.request("POST", "/v1/events", key: admin, body: body).status == 403)
        let status = try await server.request("GET", "/v1/devices/live-1", key: admin)
        #expect(status.status == 200)
        #expect(String(decoding: status.body, as: UTF8.self).contains(#""isNetworkAvailable":true"#))
        #expect(try await server.request("GET", "/v1/summary", key: ingest).status == 403)
        let metrics = String(decoding: try await server.request("GET", "/metrics").body, as: UTF8.self)
        #expect(metrics.contains("synchealth_events_total"))
        #expect(!metrics.contains("live-1"), "no per-device labels")
        #expect(String(decoding: try await server.request("GET", "/openapi.yaml").body, as: UTF8.self).hasPrefix("openapi: 3.1"))
        #expect(server.stop() == 0)

        // The same keys are used again on the next start, and the state is still there.
        let again = try LiveServer(dataDirectory: server.dataDirectory)
        try await again.waitUntilReady()
        #expect(try await again.request("GET", "/v1/devices/live-1", key: admin).status == 200)
        #expect(again.stop() == 0)
    }

    @Test("request metrics count each answer under its route and real status, errors included, and non-standard methods as _OTHER")
    func requestMetrics() async throws {
        let server = try LiveServer(environment: [
            "SYNCHEALTH_INGEST_KEYS": "ingest-1-0123456789abcdefghijklmnop", "SYNCHEALTH_READ_KEYS": "read-1-0123456789abcdefghijklmnop",
        ])
        let body = Data(
            #"{"device": {"deviceId": "m", "appId": "a"}, "events": [{"eventId": "a", "occurredAt": "2026-11-22T10:00:00Z", "kind": "heartbeat"}]}"#
                .utf8
        )
        #expect(try await server.request("POST", "/v1/events", key: "ingest-1-0123456789abcdefghijklmnop", body: body).status == 202)
        #expect(try await server.request("POST", "/v1/events", key: "read-1-0123456789abcdefghijklmnop", body: body).status == 403)
        #expect(try await server.request("GET", "/v1/summary", key: "wrong").status == 401)
        #expect(try await server.request("GET", "/no/such/path").status == 404)
        #expect(try await server.request("PURGE", "/livez").status == 405)
        let metrics = String(decoding: try await server.request("GET", "/metrics").body, as: UTF8.self)
        let post = #"http_route="/v1/events",http_request_method="POST""#
        #expect(metrics.contains(#"hb_requests{\#(post),http_response_status_code="202"} 1"#))
        #expect(metrics.contains(#"http_server_request_duration_count{\#(post),http_response_status_code="202"} 1"#))
        #expect(metrics.contains(#"hb_requests{\#(post),http_response_status_code="403"} 1"#))
        #expect(metrics.contains(#"hb_request_errors{\#(post),error_type="403"} 1"#))
        #expect(metrics.contains(#"hb_requests{http_route="/v1/summary",http_request_method="GET",http_response_status_code="401"} 1"#))
        #expect(metrics.contains(#"hb_requests{http_route="NotFound",http_request_method="GET",http_response_status_code="404"} 1"#))
        #expect(!metrics.contains(#"http_response_status_code="500""#), "no answer above was a 500")
        #expect(metrics.contains(#"hb_requests{http_route="NotFound",http_request_method="_OTHER",http_response_status_code="405"} 1"#))
        #expect(!metrics.contains("PURGE"), "a method outside the standard ones makes no series of its own")
        #expect(server.stop() == 0)
    }

    @Test("each fold of the journal into the tables is counted and timed in /metrics, and so are the claims dedupe judged without a read")
    func foldMetrics() async throws {
        let server = try LiveServer(environment: ["SYNCHEALTH_INGEST_KEYS": "ingest-1-0123456789abcdefghijklmnop"])
        try await server.waitUntilReady()
        #expect(try await server.metric("synchealth_store_folds_total") == 0, "nothing to fold yet")
        let body = Data(
            #"{"device": {"deviceId": "f", "appId": "a"}, "events": [{"eventId": "a", "occurredAt": "2026-11-22T10:00:00Z", "kind": "heartbeat"}]}"#
                .utf8
        )
        #expect(try await server.request("POST", "/v1/events", key: "ingest-1-0123456789abcdefghijklmnop", body: body).status == 202)
        // The maintenance service folds a backlog once it is 2 s old.
        _ = try await eventually(tries: 150, every: .milliseconds(100)) { try await server.metric("synchealth_store_folds_total") >= 1 }
        #expect(try await server.metric("synchealth_store_folds_total") == 1)
        #expect(try await server.metric("synchealth_store_fold_duration_seconds_count") == 1)
        #expect(try await server.metric("synchealth_store_fold_duration_seconds_sum") > 0)

        // The device's next id is above the ones it sent: judged new without a read.
        let next = Data(
            #"{"device": {"deviceId": "f", "appId": "a"}, "events": [{"eventId": "b", "occurredAt": "2026-11-22T10:00:01Z", "kind": "heartbeat"}]}"#
                .utf8
        )
        #expect(try await server.request("POST", "/v1/events", key: "ingest-1-0123456789abcdefghijklmnop", body: next).status == 202)
        #expect(try await server.metric(#"synchealth_store_dedupe_claims_total{judged="read"}"#) == 1)
        #expect(try await server.metric(#"synchealth_store_dedupe_claims_total{judged="in_memory"}"#) == 1)
        #expect(server.stop() == 0)
    }

    @Test("keys never appear in the logs, even at debug level with failed logins")
    func keysNotLogged() async throws {
        let server = try LiveServer(environment: [
            "SYNCHEALTH_INGEST_KEYS": "ingest-SECRET-1-0123456789abcdefghijklmnop",
            "SYNCHEALTH_ADMIN_KEYS": "admin-SECRET-2-0123456789abcdefghijklmnop",
            "SYNCHEALTH_READ_KEYS": "read-SECRET-3-0123456789abcdefghijklmnop", "SYNCHEALTH_LOG_LEVEL": "trace",
        ])
        let body = Data(
            #"{"device": {"deviceId": "k", "appId": "a"}, "events": [{"eventId": "a", "occurredAt": "2026-11-22T10:00:00Z", "kind": "heartbeat"}]}"#
                .utf8
        )
        #expect(try await server.request("POST", "/v1/events", key: "ingest-SECRET-1-0123456789abcdefghijklmnop", body: body).status == 202)
        #expect(try await server.request("GET", "/v1/summary", key: "wrong-SECRET-4").status == 401)
        #expect(try await server.request("GET", "/v1/summary", key: "read-SECRET-3-0123456789abcdefghijklmnop").status == 200)
        #expect(server.stop() == 0)
        let log = server.captured.text.withLock { $0 }
        #expect(log.contains("Monitor engine ready"), "the log was captured")
        #expect(!log.contains("SECRET"))
    }

    @Test("synchealth simulate fills a live server with healthy and broken devices")
    func simulate() async throws {
        let server = try LiveServer(environment: [
            "SYNCHEALTH_INGEST_KEYS": "sim-0123456789abcdefghijklmnop", "SYNCHEALTH_READ_KEYS": "read-0123456789abcdefghijklmnop",
        ])
        defer { server.stop() }
        let process = Process()
        process.executableURL = builtBinary()
        // Three rounds (the launch and two steady ones), however slow the machine: 2 s alone once left 10 of the
        // 60 devices out during a full parallel test run.
        process.arguments = [
            "simulate", "--url", "http://127.0.0.1:\(server.port)", "--key", "sim-0123456789abcdefghijklmnop", "--devices", "60",
            "--duration", "120", "--rounds", "3", "--broken-share", "0.5",
        ]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(printed.contains("done:"))
        #expect(printed.contains("[202: "), "\(printed)")
        #expect(!printed.contains("failed"), "\(printed)")
        let summary = try #require(
            try JSONSerialization.jsonObject(with: try await server.request("GET", "/v1/summary", key: "read-0123456789abcdefghijklmnop").body)
                as? [String: Any]
        )
        #expect(summary["devices"] as? Int == 60)
        #expect((summary["broken"] as? Int ?? 0) > 10)
        #expect((summary["bySummary"] as? [String: Int])?["succeeded"] ?? 0 > 10)
    }

    @Test("a second server on the same data directory refuses to start, with a clear message")
    func lockedDataDirectory() async throws {
        let first = try LiveServer()
        defer { first.stop() }
        do {
            let second = try LiveServer(dataDirectory: first.dataDirectory)
            second.stop()
            Issue.record("a second server started on a locked data directory")
        } catch let error as LiveServer.StartFailed {
            #expect(error.description.contains("in use by another running synchealth server"))
        }
    }

    @Test("SIGTERM while the database does not answer stops the server at once, not after the pool gives up")
    func shutdownWhileTheDatabaseIsDown() async throws {
        // Nothing listens on port 1: the pool retries with backoff for about a minute before it gives up.
        let server = try LiveServer(environment: ["SYNCHEALTH_DATABASE_URL": "postgres://nobody@127.0.0.1:1/none?sslmode=disable"])
        #expect(try await server.request("GET", "/readyz").status == 503)
        let started = ContinuousClock.now
        #expect(server.stop() == 0)
        #expect(ContinuousClock.now - started < .seconds(15), "stopped after \(ContinuousClock.now - started)")
        #expect(server.captured.text.withLock { $0 }.contains("Monitor engine stopped before it was ready"))
    }

    @Test("bad configuration fails at start with the variable's name")
    func badConfiguration() async throws {
        do {
            let server = try LiveServer(environment: ["SYNCHEALTH_STALLED_AFTER": "soon"])
            server.stop()
            Issue.record("started with a bad duration")
        } catch let error as LiveServer.StartFailed {
            #expect(error.description.contains("SYNCHEALTH_STALLED_AFTER"))
        }
    }
}
