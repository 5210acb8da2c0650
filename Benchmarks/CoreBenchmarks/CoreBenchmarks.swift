import Benchmark
import Foundation
import SyncHealthCore

/// Hot paths of the domain: decoding a batch, applying an event, evaluating the alert rules.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .throughput], maxDuration: .seconds(2))

    let base = Timestamp(rfc3339: "2026-11-22T10:00:00Z") ?? Timestamp(microseconds: 0)
    let error = SyncErrorReport(domain: "CKErrorDomain", code: 2, message: "partial", partialErrors: [14: 1, 25: 2])
    let bodies: [DeviceEvent.Body] = [
        .activity(.init(phase: .import, state: .started)),
        .activity(.init(phase: .import, state: .succeeded)),
        .activity(.init(phase: .export, state: .started)),
        .activity(.init(phase: .export, state: .failed, error: error)),
        .network(available: true),
        .account(.available),
        .pending(count: 3, oldestPendingAt: base),
    ]
    let events = (0..<1000).map { DeviceEvent(eventId: "e\($0)", occurredAt: base + .milliseconds(Int64($0)), body: bodies[$0 % bodies.count]) }

    Benchmark("Apply one event (MonitorState.apply)", configuration: .init(scalingFactor: .kilo)) { benchmark in
        var state = MonitorState()
        var i = 0
        for _ in benchmark.scaledIterations {
            state.apply(events[i], receivedAt: events[i].occurredAt)
            i = i == 999 ? 0 : i + 1
        }
        blackHole(state)
    }

    Benchmark("Ingest one event and evaluate the rules (DeviceRecord.ingest)", configuration: .init(scalingFactor: .kilo)) { benchmark in
        var record = DeviceRecord(key: DeviceKey(appId: "com.example", deviceId: "d1"), firstSeenAt: base)
        let configuration = AlertConfiguration()
        var i = 0
        for _ in benchmark.scaledIterations {
            blackHole(record.ingest([events[i]], info: DeviceInfo(), now: events[i].occurredAt, configuration: configuration))
            i = i == 999 ? 0 : i + 1
        }
    }

    Benchmark("Evaluate the alert rules of one device", configuration: .init(scalingFactor: .kilo)) { benchmark in
        var record = DeviceRecord(key: DeviceKey(appId: "com.example", deviceId: "d1"), firstSeenAt: base)
        _ = record.ingest(Array(events.prefix(7)), info: DeviceInfo(), now: base)
        let configuration = AlertConfiguration()
        var now = base
        for _ in benchmark.scaledIterations {
            now = now + .milliseconds(1)
            blackHole(record.evaluateAlerts(now: now, configuration: configuration))
        }
    }

    func batchJSON(_ count: Int) -> Data {
        let items = (0..<count).map { n in
            #"{"eventId": "e-\#(n)", "occurredAt": "2026-11-22T10:00:\#(String(format: "%02d", n % 60)).\#(n % 1000)Z", "kind": "activity", "phase": "export", "state": "failed", "startedAt": "2026-11-22T09:59:59Z", "error": {"domain": "CKErrorDomain", "code": 2, "partialErrors": {"14": 1}}}"#
        }
        return Data(
            #"{"device": {"deviceId": "8F1C2A6E-3B7D-4C1A-9E55-0D7A1B2C3D4E", "appId": "com.example.notes", "containerId": "iCloud.com.example.notes"}, "events": [\#(items.joined(separator: ","))]}"#
                .utf8
        )
    }
    let one = batchJSON(1)
    let hundred = batchJSON(100)

    Benchmark("Decode a batch of 1 event") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try EventBatch.decode(json: one)) }
    }

    Benchmark("Decode a batch of 100 events") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try EventBatch.decode(json: hundred)) }
    }

    Benchmark("Fleet counters: move one device", configuration: .init(scalingFactor: .kilo)) { benchmark in
        var counters = FleetCounters()
        let a = FleetContribution(
            appId: "com.example",
            containerId: "iCloud.x",
            summary: .succeeded,
            notSyncing: false,
            errorClass: nil,
            silent: false
        )
        let b = FleetContribution(
            appId: "com.example",
            containerId: "iCloud.x",
            summary: .error,
            notSyncing: false,
            errorClass: .transient,
            silent: false
        )
        counters.replace(nil, with: a)
        var flip = false
        for _ in benchmark.scaledIterations {
            counters.replace(flip ? b : a, with: flip ? a : b)
            flip.toggle()
        }
        blackHole(counters)
    }
}
