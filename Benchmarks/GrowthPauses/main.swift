// Measures the longest single insert while the engine's cache grows to N devices, with the standard collections
// (what the cache used before 86f686a: every element moves when an `Array` doubles or a `Dictionary` rehashes)
// and with `ChunkedArray` and `ShardedDictionary`; and what rebuilding a timer heap of N deadlines costs (the
// compaction the cache did every ~N events before its deadlines were queued lazily).
//
//     SYNCHEALTH_BENCHMARKS=1 swift run -c release --scratch-path .build-bench GrowthPauses [devices]
import Foundation
import HeapModule
import SyncHealthCore

let count = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 1_000_000
let start = Timestamp(rfc3339: "2026-11-22T10:00:00Z") ?? Timestamp(microseconds: 0)
let clock = ContinuousClock()

/// Runs `insert` for 0..<count and prints the three longest calls, with the count at which each came.
func grow(_ name: String, _ insert: (Int) -> Void) {
    var worst: [(ms: Double, at: Int)] = []
    let total = clock.measure {
        for i in 0..<count {
            let took = clock.measure { insert(i) }
            let ms = Double(took.components.attoseconds) / 1e15 + Double(took.components.seconds) * 1e3
            if worst.count < 3 || ms > worst[2].ms {
                worst.append((ms, i))
                worst.sort { $0.ms > $1.ms }
                if worst.count > 3 { worst.removeLast() }
            }
        }
    }
    let longest = worst.map { String(format: "%.2f ms at %d", $0.ms, $0.at) }.joined(separator: ", ")
    print("\(name): \(count) devices in \(total); longest inserts: \(longest)")
}

func record(_ i: Int) -> DeviceRecord {
    DeviceRecord(key: DeviceKey(appId: "com.bench", deviceId: "device-\(i)"), firstSeenAt: start)
}

do {
    var index: [DeviceKey: Int] = [:]
    var records: [DeviceRecord] = []
    grow("Array + Dictionary") { i in
        let r = record(i)
        index[r.key] = i
        records.append(r)
    }
}
do {
    var index = ShardedDictionary<DeviceKey, Int>()
    var records = ChunkedArray<DeviceRecord>()
    grow("ChunkedArray + ShardedDictionary") { i in
        let r = record(i)
        index[r.key] = i
        records.append(r)
    }
}

struct Deadline: Comparable {
    var at: Int64
    var index: Int32
    static func < (a: Deadline, b: Deadline) -> Bool { (a.at, a.index) < (b.at, b.index) }
}
let live = (0..<count).map { Deadline(at: Int64.random(in: 0..<3_600_000_000), index: Int32($0)) }
let rebuild = clock.measure { _ = Heap(live) }
print("rebuilding a timer heap of \(count) deadlines: \(rebuild)")
