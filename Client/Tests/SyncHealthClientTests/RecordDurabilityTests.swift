import Foundation
import Testing

@testable import SyncHealthClient

/// What `record` returned for is on disk, and what the server can ask for is bounded.
@Suite("Recorded means on disk; every wait is bounded")
struct RecordDurabilityTests {
    @Test("an event is in the inbox log when record returns, while the server fails and the loop sleeps")
    func onDiskWhenRecordReturns() async throws {
        let server = FakeServer()
        server.fallback = { _ in TransportResponse(status: 500, body: Data()) }
        let directory = temporaryDirectory()
        var configuration = testConfiguration(server, directory: directory)
        configuration.sendInterval = .seconds(30)
        let reporter = try SyncHealthReporter(configuration: configuration)
        reporter.record(.account(status: .available))
        reporter.record(.network(available: true))
        reporter.record(.activity(phase: .export, state: .failed))
        // No wait: each event is on disk, in the inbox log or, once the loop had its turn, in the queue's log.
        let queued = ((try? String(contentsOf: directory.appendingPathComponent("events.log"), encoding: .utf8)) ?? "")
            .split(separator: "\n").compactMap { line in line.split(separator: " ", maxSplits: 1).first.map(String.init) }
        let logged = InboxLog.read(directory: directory)
        #expect(logged.allSatisfy { $0.json.hasPrefix(#"{"eventId":"\#($0.id)""#) })
        let onDisk = Set(logged.map(\.id) + queued)
        #expect(onDisk.count == 3, "\(onDisk)")
        // What a kill leaves: the log and whatever reached the queue. A new reporter on the directory sends all.
        _ = consume reporter
        let later = FakeServer()
        let next = try SyncHealthReporter(configuration: testConfiguration(later, directory: directory))
        try await next.flush()
        #expect(later.deliveredIds.count == 3)
        #expect(Set(later.deliveredIds) == onDisk)
        #expect(InboxLog.read(directory: directory).isEmpty, "the log is empty once the queue holds its events")
        await next.shutdown()
    }

    @Test("a log line the queue already holds (a kill between the move and the rewrite) is sent once")
    func logLinesTheQueueHolds() async throws {
        let directory = temporaryDirectory()
        let server = FakeServer()
        server.fallback = { _ in TransportResponse(status: 500, body: Data()) }
        let reporter = try SyncHealthReporter(configuration: testConfiguration(server, directory: directory))
        reporter.record(.heartbeat)
        reporter.record(.network(available: true))
        _ = try? await reporter.flush()  // moves them to the queue, the send fails
        let queued = try EventQueue(directory: directory, limits: .init(maxEvents: 100, maxBytes: 1 << 20)).pending.map(\.self)
        #expect(queued.count == 2)
        await reporter.shutdown()
        // Put the moved lines back in the log, as a kill right after the move would have left them.
        let log = directory.appendingPathComponent(InboxLog.fileName)
        try Data(queued.map { $0.id + " " + $0.json + "\n" }.joined().utf8).write(to: log)
        let later = FakeServer()
        let next = try SyncHealthReporter(configuration: testConfiguration(later, directory: directory))
        try await next.flush()
        #expect(later.deliveredIds == queued.map(\.id))
        await next.shutdown()
    }

    @Test("a log line older than the queue's last id that the queue does not hold is sent with a new, later id")
    func olderLineGetsNewId() async throws {
        let directory = temporaryDirectory()
        let first = FakeServer()
        let reporter = try SyncHealthReporter(configuration: testConfiguration(first, directory: directory))
        reporter.record(.heartbeat)
        try await reporter.flush()
        await reporter.shutdown()
        let sent = try #require(first.deliveredIds.first)
        // A line recorded with a clock behind the queue's last id.
        let old = "00000000-0000-7000-8000-000000000001"
        let line = old + " " + #"{"eventId":"\#(old)","occurredAt":"2026-11-22T10:00:00Z","kind":"heartbeat"}"# + "\n"
        try Data(line.utf8).write(to: directory.appendingPathComponent(InboxLog.fileName))
        let later = FakeServer()
        let next = try SyncHealthReporter(configuration: testConfiguration(later, directory: directory))
        try await next.flush()
        let id = try #require(later.deliveredIds.first)
        #expect(later.deliveredIds.count == 1)
        #expect(id > sent)
        await next.shutdown()
    }

    @Test(
        "Retry-After of any size, sign or form is bounded, never a trap",
        arguments: [
            "1e300", "99999999999999999999", "-5", "NaN", "inf", "-inf", "1e-300", "Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 0001 00:00:00 GMT",
            "", "abc", "0x10",
        ]
    )
    func retryAfterBounded(value: String) {
        let waited = UploadOutcome.retryAfter(["Retry-After": value], now: Date(timeIntervalSince1970: 1_795_000_000))
        if let waited {
            #expect(waited >= .zero && waited <= .seconds(UploadOutcome.longestRetryAfter), "\(value): \(waited)")
        }
    }

    @Test("a huge Retry-After holds the queue no longer than maximumRetryDelay")
    func hugeRetryAfterIsClamped() async throws {
        let server = FakeServer()
        server.then(status: 503, headers: ["Retry-After": "1e300"])
        var configuration = testConfiguration(server)
        configuration.maximumRetryDelay = .milliseconds(200)
        let reporter = try SyncHealthReporter(configuration: configuration)
        reporter.record(.heartbeat)
        do {
            try await reporter.flush()
            Issue.record("the 503 was not reported")
        } catch SyncHealthReporterError.rateLimited(let wait) {
            #expect(wait <= .milliseconds(200))
        }
        try await Task.sleep(for: .milliseconds(250))
        try await reporter.flush()
        #expect(server.deliveredIds.count == 2)
        await reporter.shutdown()
    }
}
