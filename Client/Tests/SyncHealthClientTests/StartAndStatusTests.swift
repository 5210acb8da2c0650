import Foundation
import Observation
import Testing

@testable import SyncHealthClient

@Suite("One-line start, the observable status, activity handles", .serialized)
struct StartAndStatusTests {
    @Test("SyncHealth.start never throws: a bad configuration gives a reporter that keeps the status, sends nothing and says why")
    func startWithBadConfiguration() async throws {
        await SyncHealth.reset()
        var configuration = testConfiguration(FakeServer())
        configuration.appId = ""
        let logged = Locked<[String]>([])
        configuration.log = { line in logged.withLock { $0.append(line) } }
        let reporter = SyncHealth.start(configuration: configuration)
        #expect(SyncHealth.shared === reporter)
        guard case .invalidConfiguration(let detail)? = reporter.delivery.lastError else {
            Issue.record("expected invalidConfiguration, got \(String(describing: reporter.delivery.lastError))")
            return
        }
        #expect(detail.contains("appId"))
        #expect(logged.withLock { $0 }.contains { $0.contains("not reporting") })
        reporter.record(.network(available: false))
        #expect(reporter.status.syncStateSummary == .noNetwork)
        #expect(reporter.shared.withLock { $0.inbox.isEmpty }, "nothing piles up for a reporter that cannot send")
        await #expect(throws: SyncHealthReporterError.self) { try await reporter.flush() }
        // A second start keeps the first reporter.
        #expect(SyncHealth.start(configuration: testConfiguration(FakeServer())) === reporter)
        await SyncHealth.reset()
        #expect(SyncHealth.shared == nil)
        // And a good one delivers.
        let server = FakeServer()
        let good = SyncHealth.start(configuration: testConfiguration(server))
        good.record(.heartbeat)
        try await good.flush()
        #expect(server.deliveredIds.count == 1)
        await SyncHealth.reset()
    }

    @Test(
        "opting out and back in in one launch: stop, then start again, and what is recorded after arrives; isEnabled false stores and sends nothing"
    )
    func stopThenStartAgain() async throws {
        await SyncHealth.reset()
        let directory = temporaryDirectory()
        let server = FakeServer()
        let first = SyncHealth.start(configuration: testConfiguration(server, directory: directory))
        first.record(.heartbeat)
        try await first.flush()
        await SyncHealth.stop()
        #expect(SyncHealth.shared == nil)
        first.record(.network(available: true))

        var off = testConfiguration(server, directory: directory)
        off.isEnabled = false
        let optedOut = SyncHealth.start(configuration: off)
        #expect(optedOut !== first)
        optedOut.record(.network(available: false))
        #expect(optedOut.status.syncStateSummary == .noNetwork, "the status on the device still works")
        #expect(optedOut.delivery.lastError == .notEnabled("Configuration.isEnabled is false"))
        await #expect(throws: SyncHealthReporterError.self) { try await optedOut.flush() }
        await SyncHealth.stop()

        let again = SyncHealth.start(configuration: testConfiguration(server, directory: directory))
        again.record(.account(status: .available))
        try await again.flush()
        #expect(server.deliveredIds.count == 2, "the first launch's heartbeat, and the event after opting back in; nothing while out")
        // After a plain shutdown, too, start gives a working reporter.
        await again.shutdown()
        let fourth = SyncHealth.start(configuration: testConfiguration(server, directory: directory))
        #expect(fourth !== again)
        fourth.record(.heartbeat)
        try await fourth.flush()
        #expect(server.deliveredIds.count == 3)
        await SyncHealth.reset()
    }

    @Test("a SwiftUI preview and a unit-test host report nothing unless asked to")
    func previewsAndTestHosts() async throws {
        for environment in [["XCODE_RUNNING_FOR_PREVIEWS": "1"], ["XCTestConfigurationFilePath": "/tmp/x.xctestconfiguration"]] {
            let server = FakeServer()
            var configuration = testConfiguration(server)
            configuration.reportsFromPreviewsAndTests = false
            configuration.platform.environment = { environment }
            let reporter = try SyncHealthReporter(configuration: configuration)
            reporter.record(.heartbeat)
            guard case .notEnabled(let why)? = reporter.delivery.lastError else {
                Issue.record("expected notEnabled, got \(String(describing: reporter.delivery.lastError))")
                continue
            }
            #expect(why.contains("preview") || why.contains("test host"))
            await #expect(throws: SyncHealthReporterError.self) { try await reporter.flush() }
            #expect(server.requests.isEmpty)
            await reporter.shutdown()

            configuration.reportsFromPreviewsAndTests = true
            let asked = try SyncHealthReporter(configuration: configuration)
            asked.record(.heartbeat)
            try await asked.flush()
            #expect(server.deliveredIds.count == 1, "reportsFromPreviewsAndTests turns it on")
            await asked.shutdown()
        }
    }

    @Test("appId defaults to the bundle identifier, and is refused when there is none")
    func appIdDefault() {
        let configuration = SyncHealthReporter.Configuration(endpoint: URL(string: "https://example.com")!, ingestKey: "k")
        #expect(configuration.appId == (Bundle.main.bundleIdentifier ?? ""))
        if Bundle.main.bundleIdentifier == nil {
            #expect(throws: SyncHealthReporterError.self) { try SyncHealthReporter(configuration: configuration) }
        }
    }

    @Test("SyncHealthStatus follows the reporter on the main actor, and Observation sees each change")
    @MainActor
    func observableStatus() async throws {
        let reporter = try SyncHealthReporter(configuration: testConfiguration(FakeServer()))
        let model = SyncHealthStatus(reporter: reporter)
        #expect(model.syncStateSummary == reporter.status.syncStateSummary)
        let changed = Locked(false)
        withObservationTracking {
            _ = model.isBroken
        } onChange: {
            changed.withLock { $0 = true }
        }
        reporter.record(.account(status: .available))
        reporter.record(.network(available: true))
        reporter.record(.activity(phase: .setup, state: .failed, error: SyncErrorReport(domain: "CKErrorDomain", code: 5)))
        try await waitUntil { model.syncStateSummary == .error }
        #expect(changed.withLock { $0 })
        #expect(model.isBroken)
        #expect(model.symbolColor == .red)
        #expect(model.symbolName == "exclamationmark.icloud")
        #expect(model.description == "Error")
        #expect(model.lastError?.code == 5)
        #expect(model.lastErrorClass == .developer)
        #expect(model.reportingError == nil)
        await reporter.shutdown()
    }

    @Test("begin/succeeded/failed: one start, one end with the same activity id; later ends are ignored")
    func activityHandles() async throws {
        let server = FakeServer()
        let reporter = try SyncHealthReporter(configuration: testConfiguration(server))
        let op = reporter.begin(.export)
        #expect(reporter.status.exportState == .inProgress(startedAt: Timestamp(op.startedAt)))
        // As SyncKit's completion handler would call it.
        let completion: ((any Error)?) -> Void = { error in op.finished(error: error) }
        completion(NSError(domain: "CKErrorDomain", code: 25))
        op.succeeded()
        let failing = reporter.begin(.import)
        failing.succeeded()
        failing.failed(NSError(domain: "CKErrorDomain", code: 5))
        try await reporter.flush()
        let events = server.requests.flatMap { $0.json["events"] as? [[String: Any]] ?? [] }
        let states = events.compactMap { $0["state"] as? String }
        #expect(states == ["started", "failed", "started", "succeeded"])
        #expect(events[0]["activityId"] as? String == op.activityId && events[1]["activityId"] as? String == op.activityId)
        #expect((events[1]["error"] as? [String: Any])?["code"] as? Int == 25)
        await reporter.shutdown()
    }

    @Test("Timestamp and Date convert both ways to the microsecond")
    func dateConversions() {
        let date = Date(timeIntervalSince1970: 1_795_000_000.123456)
        let timestamp = Timestamp(date)
        #expect(timestamp.microseconds == 1_795_000_000_123_456)
        #expect(abs(Date(timestamp).timeIntervalSince(date)) < 0.000_001)
        #expect(timestamp.date == Date(timestamp))
    }

    @Test("the symbol colour is a type: gray, red or green, as the summary says")
    func symbolColor() {
        for summary in SyncStateSummary.allCases {
            #expect(SyncSymbolColor(rawValue: summary.symbolColor) != nil)
        }
    }
}

/// Waits for `condition`, checking every 10 ms, for 5 s at most.
@MainActor
func waitUntil(_ condition: @MainActor () -> Bool) async throws {
    for _ in 0..<500 {
        if condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("the condition did not become true within 5 s")
}
