import Benchmark
import Foundation
import SyncHealthClient

/// Accepts every batch at once, without a network.
struct AcceptAll: ReportTransport {
    func post(_ body: Data, to url: URL, headers: [String: String]) async throws -> TransportResponse {
        TransportResponse(status: 202, body: Data(#"{"accepted":1,"duplicates":0,"rejected":[]}"#.utf8))
    }
}

/// The cost of `record` on the app's thread, and its whole cost with the agent's share (writing the queue).
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .throughput], maxDuration: .seconds(3))

    func reporter() throws -> SyncHealthReporter {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("synchealth-bench-\(UUID().uuidString)")
        var c = SyncHealthReporter.Configuration(
            endpoint: URL(string: "http://127.0.0.1:9")!,
            ingestKey: "k",
            appId: "com.example.notes",
            containerId: "iCloud.com.example.notes",
            deviceId: "bench",
            storageDirectory: directory
        )
        c.transport = AcceptAll()
        c.heartbeatOnStart = false
        c.observesNetworkAndAccount = false
        c.sendInterval = .seconds(3600)
        c.maxQueuedEvents = 1_000_000
        c.maxQueuedBytes = 1 << 30
        c.log = { _ in }
        return try SyncHealthReporter(configuration: c)
    }
    let events: [SyncEvent] = [
        .activity(phase: .import, state: .started, activityId: UUID().uuidString),
        .activity(phase: .import, state: .succeeded, activityId: UUID().uuidString),
        .network(available: true),
        .pending(count: 3),
    ]

    Benchmark("record one event (caller's thread)", configuration: .init(scalingFactor: .kilo)) { benchmark in
        let r = try reporter()
        var i = 0
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            r.record(events[i & 3])
            i += 1
        }
        benchmark.stopMeasurement()
        await r.shutdown()
    }

    Benchmark("record one event and queue it on disk (whole cost)", configuration: .init(scalingFactor: .kilo)) { benchmark in
        let r = try reporter()
        var i = 0
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            r.record(events[i & 3])
            i += 1
        }
        // Shutdown writes what the agent has not written yet: the measurement covers every event reaching the disk.
        await r.shutdown()
        benchmark.stopMeasurement()
    }
}
