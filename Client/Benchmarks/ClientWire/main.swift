import Foundation
import SyncHealthClient

// Figures of the client that are not timings of a hot path: bytes on the wire per event in a typical batch, and
// how often an idle reporter wakes its process.

/// Keeps the size of every body sent.
final class Capture: ReportTransport, @unchecked Sendable {
    let lock = NSLock()
    var bodies: [(bytes: Int, gzip: Bool)] = []
    func post(_ body: Data, to url: URL, headers: [String: String]) async throws -> TransportResponse {
        lock.withLock { bodies.append((body.count, headers["Content-Encoding"] == "gzip")) }
        return TransportResponse(status: 202, body: Data(#"{"accepted":1,"duplicates":0,"rejected":[]}"#.utf8))
    }
}

func reporter(_ transport: some ReportTransport, compressAbove: Int = 1024) throws -> SyncHealthReporter {
    var c = SyncHealthReporter.Configuration(
        endpoint: URL(string: "http://127.0.0.1:9")!,
        ingestKey: "k",
        appId: "com.example.notes",
        containerId: "iCloud.com.example.notes",
        deviceId: UUID().uuidString,
        storageDirectory: FileManager.default.temporaryDirectory.appendingPathComponent("synchealth-wire-\(UUID().uuidString)")
    )
    c.transport = transport
    c.heartbeatOnStart = false
    c.observesNetworkAndAccount = false
    c.compressAbove = compressAbove
    c.log = { _ in }
    return try SyncHealthReporter(configuration: c)
}

/// A typical batch of 100: an app's sync activity as NSPersistentCloudKitContainer reports it (start/end pairs
/// with the event's identifier), a few network and pending changes, failures with partial errors. Returns the
/// number of events recorded.
func typicalSession(_ r: SyncHealthReporter) -> Int {
    let start = Date()
    var n = 0
    while n < 100 {
        let phase: Phase = n % 3 == 0 ? .export : .import
        let id = UUID().uuidString
        r.record(.activity(phase: phase, state: .started, activityId: id, startedAt: start + Double(n)), at: start + Double(n))
        if n % 23 == 22 {
            let error = SyncErrorReport(domain: "CKErrorDomain", code: 2, message: "Partial Failure", partialErrors: [14: 2, 26: 1])
            r.record(
                .activity(phase: phase, state: .failed, activityId: id, startedAt: start + Double(n), endedAt: start + Double(n) + 0.4, error: error),
                at: start + Double(n) + 0.4
            )
        } else {
            r.record(
                .activity(phase: phase, state: .succeeded, activityId: id, startedAt: start + Double(n), endedAt: start + Double(n) + 0.4),
                at: start + Double(n) + 0.4
            )
        }
        n += 2
        if n % 10 == 0 && n < 100 {
            r.record(.pending(count: n % 7, oldestPendingAt: start), at: start + Double(n))
            n += 1
        }
        if n % 33 == 0 && n < 100 {
            r.record(.network(available: n % 2 == 0), at: start + Double(n))
            n += 1
        }
    }
    return n
}

/// Voluntary context switches of the whole process so far, exited threads included: a thread that sleeps and
/// is woken counts one.
func contextSwitches() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return usage.ru_nvcsw
}

let idleSeconds = Double(ProcessInfo.processInfo.environment["CLIENT_WIRE_IDLE_SECONDS"] ?? "") ?? 20

// Idle first, before anything else ran in this process: the same stretch with no reporter, then with a reporter
// that has nothing to send.
let baselineStart = contextSwitches()
try await Task.sleep(for: .seconds(idleSeconds))
let baseline = contextSwitches() - baselineStart
let capture = Capture()
let idle = try reporter(capture)
try await Task.sleep(for: .milliseconds(200))  // let it open its queue
let idleStart = contextSwitches()
try await Task.sleep(for: .seconds(idleSeconds))
let withReporter = contextSwitches() - idleStart
await idle.shutdown()
let perHour = { (n: Int) in Double(n) * 3600 / idleSeconds }
print(
    "idle \(Int(idleSeconds)) s: wake-ups without a reporter \(baseline), with an idle reporter \(withReporter); per hour: \(Int(perHour(baseline))) vs \(Int(perHour(withReporter))); requests sent: \(capture.bodies.count)"
)

for (label, threshold) in [("gzip", 1024), ("plain", Int.max)] {
    let capture = Capture()
    let r = try reporter(capture, compressAbove: threshold)
    let events = typicalSession(r)
    try await r.flush()
    await r.shutdown()
    let bytes = capture.bodies.reduce(0) { $0 + $1.bytes }
    print(
        "wire \(label): \(capture.bodies.count) request(s), \(bytes) bytes for \(events) events: \(String(format: "%.1f", Double(bytes) / Double(events))) B/event"
    )
}

// What `record` costs its caller: the monitor's update, the event's JSON and its append to the inbox log (one
// write, no fsync), under the reporter's lock. The queue and the network are the delivery actor's, off this thread.
do {
    let r = try reporter(Capture())
    let clock = ContinuousClock()
    var samples: [Duration] = []
    samples.reserveCapacity(20_000)
    for i in 0..<20_000 {
        let event: SyncEvent = i % 2 == 0 ? .pending(count: i % 50) : .activity(phase: .export, state: .succeeded)
        let start = clock.now
        r.record(event)
        samples.append(clock.now - start)
        if i % 500 == 499 { try await Task.sleep(for: .milliseconds(5)) }  // let the agent move the inbox, as an app would
    }
    await r.shutdown()
    samples.sort()
    let micros = { (d: Duration) in Double(d.components.attoseconds) / 1e12 + Double(d.components.seconds) * 1e6 }
    print(
        String(
            format: "record: p50 %.1f µs, p99 %.1f µs, max %.0f µs over %d calls (on disk when it returns)",
            micros(samples[samples.count / 2]),
            micros(samples[samples.count * 99 / 100]),
            micros(samples[samples.count - 1]),
            samples.count
        )
    )
}
