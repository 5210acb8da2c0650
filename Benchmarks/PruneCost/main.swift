// Measures how long the embedded store takes to forget expired event ids, batch by batch, as the engine's hourly
// pass does: `expired` ids recorded long ago and `kept` recent ones, recorded in groups of 32 devices x 100 ids,
// then `pruneEventIds(recordedBefore:limit:)` until a batch comes back short. synchronous=FULL and the maintenance
// service (folds and checkpoints) running, as in the server.
//
//     swift run -c release PruneCost [expired] [kept] [batch]
import Foundation
import Logging
import ServiceLifecycle
import SyncHealthCore
import SyncHealthSQLite
import SyncHealthStore

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let expired = arguments.count > 0 ? arguments[0] : 1_000_000
let kept = arguments.count > 1 ? arguments[1] : 3_000_000
let batch = arguments.count > 2 ? arguments[2] : 500

let directory = NSTemporaryDirectory() + "synchealth-prunecost-" + UUID().uuidString
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }
let store = try SQLiteStore(directory: directory)
let old = Timestamp(rfc3339: "2026-11-01T00:00:00Z") ?? Timestamp(microseconds: 0)
let recent = old + .seconds(8 * 24 * 3600)

/// Records `count` ids from `start`, one group of 3,200 per commit, each group a millisecond after the last.
func record(_ count: Int, from start: Timestamp, prefix: String) async throws -> Duration {
    let clock = ContinuousClock()
    return try await clock.measure {
        var group = 0
        var done = 0
        while done < count {
            let claims = (0..<32).map { d in
                (
                    key: DeviceKey(appId: "com.bench", deviceId: "dev-\(group)-\(d)"),
                    eventIds: (0..<100).map { "\(prefix)-\(group)-\(d)-\($0)" }
                )
            }
            let at = start + .milliseconds(group)
            _ = try await store.commit(claiming: claims, at: at) { _ in (changes: StoreChanges(recordedAt: at), result: 0) }
            done += 3200
            group += 1
        }
    }
}

func milliseconds(_ d: Duration) -> Double { Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15 }

try await withThrowingTaskGroup(of: Void.self) { tasks in
    tasks.addTask { try await store.maintenance(logger: Logger(label: "prune-cost")).run() }
    let recordOld = try await record(expired, from: old, prefix: "old")
    let recordNew = try await record(kept, from: recent, prefix: "new")
    print(
        "recorded \(expired) expired ids in \(String(format: "%.1f", milliseconds(recordOld) / 1000)) s and \(kept) recent ones in \(String(format: "%.1f", milliseconds(recordNew) / 1000)) s"
    )

    var times: [Double] = []
    var forgotten = 0
    let clock = ContinuousClock()
    while true {
        var removed = 0
        let elapsed = try await clock.measure { removed = try await store.pruneEventIds(recordedBefore: recent, limit: batch) }
        times.append(milliseconds(elapsed))
        forgotten += removed
        if removed < batch { break }
    }
    let sorted = times.sorted()
    let total = times.reduce(0, +)
    print(
        "forgot \(forgotten) ids in \(times.count) batches of \(batch): p50 \(String(format: "%.2f", sorted[sorted.count / 2])) ms, "
            + "p99 \(String(format: "%.2f", sorted[min(sorted.count - 1, sorted.count * 99 / 100)])) ms, max \(String(format: "%.2f", sorted.last ?? 0)) ms, "
            + "\(String(format: "%.1f", total * 1000 / Double(max(forgotten, 1)))) us per id, \(String(format: "%.1f", total / 1000)) s in all"
    )
    try await store.close()
    tasks.cancelAll()
}
