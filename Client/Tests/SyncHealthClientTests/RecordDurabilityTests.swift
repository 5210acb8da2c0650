import Foundation
import Testing

@testable import SyncHealthClient

/// A server that answers the first request only after `stall` (or never, if the sender gives up first).
private final class StallingServer: ReportTransport, @unchecked Sendable {
    let inner = FakeServer()
    let stall: Duration
    private let calls = Locked(0)

    init(stall: Duration) { self.stall = stall }

    func post(_ body: Data, to url: URL, headers: [String: String]) async throws -> TransportResponse {
        let first = calls.withLock { n in
            defer { n += 1 }
            return n == 0
        }
        if first { try await Task.sleep(for: stall) }
        return try await inner.post(body, to: url, headers: headers)
    }
}

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

    @Test("record takes any date without trapping: NaN is now, the rest clamped to 1970…9999; every event arrives with a date the server reads")
    func anyDate() async throws {
        let server = FakeServer()
        var configuration = testConfiguration(server)
        configuration.heartbeatOnStart = false
        let reporter = try SyncHealthReporter(configuration: configuration)
        let dates: [Double] = [.nan, .infinity, -.infinity, 1e300, -1e300, -1, 0, 1e15, .greatestFiniteMagnitude, 253_402_300_800, 1_800_000_000.5]
        for seconds in dates { reporter.record(.network(available: true), at: Date(timeIntervalSince1970: seconds)) }
        try await reporter.flush()
        let events = server.requests.flatMap { $0.json["events"] as? [[String: Any]] ?? [] }
        #expect(events.count == dates.count, "every event arrives")
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for event in events {
            let text = event["occurredAt"] as? String ?? ""
            let date = formatter.date(from: text) ?? ISO8601DateFormatter().date(from: text)
            #expect(date.map { $0.timeIntervalSince1970 >= 0 && $0.timeIntervalSince1970 <= 253_402_300_799 } == true, "\(text)")
        }
        #expect(SyncHealthReporter.representable(Date(timeIntervalSince1970: .nan)).timeIntervalSince1970 > 1_700_000_000, "NaN is now")
        await reporter.shutdown()
    }

    @Test("flush(within:) returns when its time runs out, however long the server takes; the events stay queued and arrive once later")
    func flushWithinBound() async throws {
        let server = StallingServer(stall: .seconds(60))
        var configuration = testConfiguration(FakeServer())
        configuration.transport = server
        let reporter = try SyncHealthReporter(configuration: configuration)
        for _ in 0..<3 { reporter.record(.heartbeat) }
        let started = ContinuousClock.now
        await #expect(throws: SyncHealthReporterError.self) { try await reporter.flush(within: .milliseconds(300)) }
        let took = ContinuousClock.now - started
        #expect(took < .seconds(5), "returned after \(took), not after the server's 60 s")
        try await reporter.flush()
        #expect(server.inner.deliveredIds.count == 3, "every event arrives once: \(server.inner.deliveredIds)")
        try await reporter.flush(within: .seconds(5))
        #expect(server.inner.deliveredIds.count == 3)
        await reporter.shutdown()
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

    @Test("a log line at or below the queue's last id that the queue does not hold was moved and acknowledged: it is not sent again")
    func movedLineIsNotSentAgain() async throws {
        let directory = temporaryDirectory()
        let first = FakeServer()
        let reporter = try SyncHealthReporter(configuration: testConfiguration(first, directory: directory))
        reporter.record(.heartbeat)
        try await reporter.flush()
        await reporter.shutdown()
        let sent = try #require(first.deliveredIds.first)
        // The line of the event already sent, as a failed rewrite leaves it, and one below it.
        let old = "00000000-0000-7000-8000-000000000001"
        let lines = [old, sent].map { id in id + " " + #"{"eventId":"\#(id)","occurredAt":"2026-11-22T10:00:00Z","kind":"heartbeat"}"# + "\n" }
        try Data(lines.joined().utf8).write(to: directory.appendingPathComponent(InboxLog.fileName))
        let later = FakeServer()
        let next = try SyncHealthReporter(configuration: testConfiguration(later, directory: directory))
        next.record(.network(available: true))
        try await next.flush()
        #expect(later.deliveredIds.count == 1, "only the new event: \(later.deliveredIds)")
        #expect(try #require(later.deliveredIds.first) > sent, "a new event's id is above everything stored")
        await next.shutdown()
    }

    @Test("an inbox rewrite that fails once after the move: every event arrives once, none twice, across a restart")
    func failedRewriteSendsNothingTwice() async throws {
        struct DiskFull: Error {}
        let directory = temporaryDirectory()
        let server = FakeServer()
        // Once armed, the first write after both events reached the queue's file (the inbox rewrite after the move)
        // fails, as on a full disk.
        let armed = Locked(false)
        let queueFile = directory.appendingPathComponent("events.log")
        var configuration = testConfiguration(server, directory: directory)
        configuration.platform.beforeQueueWrite = {
            let queued = ((try? String(contentsOf: queueFile, encoding: .utf8)) ?? "").split(separator: "\n").count
            try armed.withLock { armed in
                guard armed, queued >= 2 else { return }
                armed = false
                throw DiskFull()
            }
        }
        armed.withLock { $0 = true }
        let reporter = try SyncHealthReporter(configuration: configuration)
        reporter.record(.heartbeat)
        reporter.record(.network(available: true))
        try await reporter.flush()
        #expect(armed.withLock { !$0 }, "the rewrite after the move failed")
        #expect(!InboxLog.read(directory: directory).isEmpty, "the log still holds moved lines")
        await reporter.shutdown()

        let next = try SyncHealthReporter(configuration: testConfiguration(server, directory: directory))
        next.record(.account(status: .available))
        try await next.flush()
        await next.shutdown()
        #expect(server.deliveredIds.count == 3 && Set(server.deliveredIds).count == 3, "\(server.deliveredIds)")
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
