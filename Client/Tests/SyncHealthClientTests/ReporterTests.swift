import Foundation
import Testing

@testable import SyncHealthClient

@Suite("The reporter against a stand-in server")
struct ReporterTests {
    @Test("record then flush: one request with the device, every event once, in order, with the key; the queue empties")
    func recordAndFlush() async throws {
        let server = FakeServer()
        let reporter = try SyncHealthReporter(configuration: testConfiguration(server))
        reporter.record(.account(status: .available))
        reporter.record(.network(available: true))
        reporter.record(.activity(phase: .setup, state: .succeeded))
        try await reporter.flush()
        let request = try #require(server.requests.first)
        #expect(server.requests.count == 1)
        #expect(request.headers["Authorization"] == "Bearer ingest")
        #expect(request.headers["Content-Encoding"] == nil, "small bodies are not gzipped")
        let device = try #require(request.json["device"] as? [String: Any])
        #expect(device["deviceId"] as? String == "device-1")
        #expect(device["appId"] as? String == "com.example.notes")
        #expect(device["containerId"] as? String == "iCloud.com.example.notes")
        let kinds = (request.json["events"] as? [[String: Any]])?.compactMap { $0["kind"] as? String }
        #expect(kinds == ["account", "network", "activity"])
        #expect(request.eventIds == request.eventIds.sorted())
        #expect(reporter.delivery.queuedEvents == 0)
        #expect(reporter.delivery.deliveredEvents == 3)
        await reporter.shutdown()
    }

    @Test("batches hold 100 events at most, and bodies over 1 KiB are gzipped")
    func batching() async throws {
        let server = FakeServer()
        let reporter = try SyncHealthReporter(configuration: testConfiguration(server))
        for i in 0..<250 { reporter.record(.pending(count: i)) }
        try await reporter.flush()
        #expect(server.requests.map(\.eventIds.count) == [100, 100, 50])
        #expect(server.requests.allSatisfy { $0.headers["Content-Encoding"] == "gzip" })
        #expect(server.deliveredIds.count == 250 && Set(server.deliveredIds).count == 250)
        await reporter.shutdown()
    }

    @Test("the local status is the monitor's summary of what was recorded, and observers see it change")
    func localStatus() async throws {
        let reporter = try SyncHealthReporter(configuration: testConfiguration(FakeServer()))
        var updates = reporter.statusUpdates().makeAsyncIterator()
        #expect(await updates.next()?.syncStateSummary == .notStarted)
        reporter.record(.account(status: .available))
        reporter.record(.network(available: true))
        reporter.record(.activity(phase: .setup, state: .succeeded))
        #expect(reporter.syncStateSummary == .notSyncing)
        #expect(reporter.isNotSyncing && reporter.isBroken)
        #expect(reporter.status.symbolName == "xmark.icloud")
        reporter.record(.activity(phase: .export, state: .failed, error: SyncErrorReport(domain: "CKErrorDomain", code: 25)))
        #expect(reporter.syncStateSummary == .error)
        #expect(reporter.status.exportError?.errorClass == .userAction)
        #expect(await updates.next()?.syncStateSummary == .error, "the stream keeps the newest status")
        await reporter.shutdown()
    }

    @Test("413 splits the batch in halves; one event alone that is too large is dropped")
    func tooLarge() async throws {
        let server = FakeServer()
        server.fallback = { request in request.eventIds.count > 25 ? TransportResponse(status: 413) : FakeServer.accepted(request) }
        let reporter = try SyncHealthReporter(configuration: testConfiguration(server))
        for i in 0..<100 { reporter.record(.pending(count: i)) }
        try await reporter.flush()
        #expect(server.requests.map(\.eventIds.count) == [100, 50, 25, 25, 25, 25])
        #expect(Set(server.deliveredIds).count == 100)
        #expect(reporter.delivery.deliveredEvents == 100)
        await reporter.shutdown()

        let single = FakeServer()
        single.fallback = { _ in TransportResponse(status: 413) }
        let alone = try SyncHealthReporter(configuration: testConfiguration(single))
        alone.record(.heartbeat)
        try await alone.flush()
        #expect(alone.delivery.queuedEvents == 0)
        #expect(alone.delivery.rejectedEvents == 1)
        await alone.shutdown()
    }

    @Test("429 with Retry-After keeps the batch and flush refuses to send before the time; afterwards it goes through")
    func rateLimited() async throws {
        let server = FakeServer()
        server.then(status: 429, headers: ["Retry-After": "2"])
        // The tests' configuration caps every wait at 50 ms (maximumRetryDelay), which would make the window a race
        // with the second flush: this test's cap is above the server's two seconds.
        var configuration = testConfiguration(server)
        configuration.maximumRetryDelay = .seconds(10)
        let reporter = try SyncHealthReporter(configuration: configuration)
        reporter.record(.network(available: true))
        await #expect(throws: SyncHealthReporterError.self) { try await reporter.flush() }
        #expect(reporter.delivery.queuedEvents == 1)
        guard case .rateLimited? = reporter.delivery.lastError else {
            Issue.record("\(String(describing: reporter.delivery.lastError))")
            return
        }
        // Within the window a flush sends nothing.
        await #expect(throws: SyncHealthReporterError.self) { try await reporter.flush() }
        #expect(server.requests.count == 1)
        try await Task.sleep(for: .milliseconds(2_100))
        try await reporter.flush()
        #expect(server.requests.count == 2)
        #expect(server.requests[0].eventIds == server.requests[1].eventIds, "the same batch, so the server dedupes it")
        #expect(reporter.delivery.queuedEvents == 0 && reporter.delivery.lastError == nil)
        await reporter.shutdown()
    }

    @Test("401 stops sending until the key is replaced; events stay queued")
    func refused() async throws {
        let server = FakeServer()
        server.then(status: 401, body: #"{"detail":"unknown key"}"#)
        let reporter = try SyncHealthReporter(configuration: testConfiguration(server))
        reporter.record(.network(available: true))
        await #expect(throws: SyncHealthReporterError.refused(status: 401, detail: "unknown key")) { try await reporter.flush() }
        await #expect(throws: SyncHealthReporterError.refused(status: 401, detail: "unknown key")) { try await reporter.flush() }
        #expect(server.requests.count == 1, "nothing is sent while refused")
        await reporter.updateIngestKey("better")
        try await reporter.flush()
        #expect(server.requests.last?.headers["Authorization"] == "Bearer better")
        #expect(reporter.delivery.queuedEvents == 0)
        await reporter.shutdown()
    }

    @Test("events the server rejects one by one are dropped, not retried")
    func rejected() async throws {
        let server = FakeServer()
        server.then { _ in TransportResponse(status: 202, body: Data(#"{"accepted":1,"duplicates":0,"rejected":[{"index":1,"detail":"bad"}]}"#.utf8))
        }
        let reporter = try SyncHealthReporter(configuration: testConfiguration(server))
        reporter.record(.network(available: true))
        reporter.record(.pending(count: 1))
        try await reporter.flush()
        try await reporter.flush()
        #expect(server.requests.count == 1)
        #expect(reporter.delivery.rejectedEvents == 1)
        await reporter.shutdown()
    }

    @Test("a network failure keeps the batch and backs off; the scheduled loop sends it later without a flush")
    func networkFailureThenScheduled() async throws {
        struct Down: Error {}
        let server = FakeServer()
        let failing = FailingTransport(inner: server, failures: 2)
        var configuration = testConfiguration(server)
        configuration.transport = failing
        configuration.sendInterval = .milliseconds(20)
        let reporter = try SyncHealthReporter(configuration: configuration)
        reporter.record(.network(available: false))
        let deadline = ContinuousClock.now + .seconds(10)
        // The batch leaves the queue once its answer is handled, just after the server saw the request.
        while server.requests.isEmpty || reporter.delivery.queuedEvents != 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(failing.attempts >= 3)
        #expect(server.requests.count == 1)
        #expect(reporter.delivery.queuedEvents == 0)
        await reporter.shutdown()
    }

    @Test("what is recorded and not delivered is sent by the next reporter over the same directory; nothing is sent twice")
    func survivesRestart() async throws {
        let dir = temporaryDirectory()
        let first = FakeServer()
        first.fallback = { _ in TransportResponse(status: 503) }
        let a = try SyncHealthReporter(configuration: testConfiguration(first, directory: dir))
        for i in 0..<5 { a.record(.pending(count: i)) }
        await #expect(throws: SyncHealthReporterError.self) { try await a.flush() }
        await a.shutdown()

        let second = FakeServer()
        let b = try SyncHealthReporter(configuration: testConfiguration(second, directory: dir))
        b.record(.heartbeat)
        try await b.flush()
        try await b.flush()
        #expect(second.deliveredIds.count == 6)
        #expect(Array(second.deliveredIds.prefix(5)) == first.requests[0].eventIds)
        #expect(second.deliveredIds == second.deliveredIds.sorted())
        await b.shutdown()
    }

    @Test("with a full queue the oldest events go first, and the count is exposed")
    func fullQueue() async throws {
        let server = FakeServer()
        var configuration = testConfiguration(server)
        configuration.maxQueuedEvents = 10
        let reporter = try SyncHealthReporter(configuration: configuration)
        for i in 0..<25 { reporter.record(.pending(count: i)) }
        try await reporter.flush()
        #expect(reporter.delivery.droppedEvents == 15)
        let counts = (server.requests.first?.json["events"] as? [[String: Any]])?.compactMap { $0["pendingChanges"] as? Int }
        #expect(counts == Array(15..<25))
        await reporter.shutdown()
    }

    @Test("an idle reporter sends nothing and wakes for nothing")
    func idle() async throws {
        let server = FakeServer()
        var configuration = testConfiguration(server)
        configuration.sendInterval = .milliseconds(10)
        let reporter = try SyncHealthReporter(configuration: configuration)
        try await Task.sleep(for: .milliseconds(200))
        #expect(server.requests.isEmpty)
        await reporter.shutdown()
    }

    @Test("the device id is created once and kept with the queue; a bad configuration fails at init")
    func identityAndValidation() async throws {
        let dir = temporaryDirectory()
        var configuration = testConfiguration(FakeServer(), directory: dir)
        configuration.deviceId = nil
        let a = try SyncHealthReporter(configuration: configuration)
        let id = try await a.deviceId()
        await a.shutdown()
        #expect(UUID(uuidString: id) != nil)
        let b = try SyncHealthReporter(configuration: configuration)
        #expect(try await b.deviceId() == id)
        await b.shutdown()
        configuration.appId = "bad app id"
        #expect(throws: SyncHealthReporterError.self) { try SyncHealthReporter(configuration: configuration) }
    }
}

/// Fails the first `failures` requests with a network error, then passes them on.
final class FailingTransport: ReportTransport, @unchecked Sendable {
    struct Down: Error {}
    let inner: FakeServer
    private let lock = NSLock()
    private var remaining: Int
    private var _attempts = 0
    var attempts: Int { lock.withLock { _attempts } }

    init(inner: FakeServer, failures: Int) {
        self.inner = inner
        remaining = failures
    }

    func post(_ body: Data, to url: URL, headers: [String: String]) async throws -> TransportResponse {
        let fail = lock.withLock { () -> Bool in
            _attempts += 1
            if remaining > 0 {
                remaining -= 1
                return true
            }
            return false
        }
        if fail { throw Down() }
        return try await inner.post(body, to: url, headers: headers)
    }
}
