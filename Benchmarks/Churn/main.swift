// A fleet that replaces a tenth of its devices a day, run forward on a manual clock over the embedded store as the
// server runs it (commit journal, folds and checkpoints by `SQLiteMaintenance`), with devices forgotten after
// `forgetDays` (`SYNCHEALTH_FORGET_AFTER`) and alert history kept `historyDays` (`SYNCHEALTH_ALERT_RETENTION`).
// Every active device posts once a simulated day, spread over its 24 hours. Every 30 days it prints the devices
// kept, the resident memory after a heap trim, and the data directory's size; then the last against the first
// sample taken once both windows have filled (`forgetDays + historyDays`), and against the first month. The goal:
// flat within 10%.
//
//     SYNCHEALTH_BENCHMARKS=1 swift build -c release --product Churn
//     .build/release/Churn [fleet] [days] [forgetDays] [historyDays]
import CHeap
import Foundation
import Logging
import ServiceLifecycle
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthSQLite
import SyncHealthStore
import SyncHealthWebhooks

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let fleet = arguments.count > 0 ? arguments[0] : 20_000
let days = arguments.count > 1 ? arguments[1] : 365
let forgetDays = arguments.count > 2 ? arguments[2] : 30
let historyDays = arguments.count > 3 ? arguments[3] : forgetDays
let churn = fleet / 10

let directory = NSTemporaryDirectory() + "synchealth-churn-" + UUID().uuidString
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
// SYNCHEALTH_CHURN_KEEP=1 keeps the data directory, to look into with sqlite3.
let keep = ProcessInfo.processInfo.environment["SYNCHEALTH_CHURN_KEEP"] != nil
defer { if keep { print("kept \(directory)") } else { try? FileManager.default.removeItem(atPath: directory) } }

var logger = Logger(label: "churn")
logger.logLevel = .warning
let start = Timestamp(rfc3339: "2026-01-01T00:00:00Z") ?? Timestamp(microseconds: 0)
let clock = ManualClock(start)
// NORMAL: the sizes and memory measured do not depend on it, and the simulated year runs sooner.
let store = try SQLiteStore(directory: directory, synchronous: .normal)
var configuration = EngineConfiguration()
configuration.forgetAfter = .seconds(Int64(forgetDays) * 86_400)
configuration.alertRetention = .seconds(Int64(historyDays) * 86_400)
let delivery = MonitorStore.local(store).makeDelivery(
    clock: clock,
    configuration: DeliveryConfiguration(),
    transport: CurlTransport(totalTimeout: .seconds(1)),
    logger: logger
)
let engine = MonitorStore.local(store).makeEngine(clock: clock, configuration: configuration, delivery: delivery, logger: logger)

/// The data directory's bytes on disk (database, WAL, journal segments).
/// The data directory's bytes: the database file, its WAL, and the rest (the commit journal's segments).
func directoryBytes() -> (database: Int, wal: Int, journal: Int) {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    var bytes = (database: 0, wal: 0, journal: 0)
    for name in names {
        let attributes = try? FileManager.default.attributesOfItem(atPath: (directory as NSString).appendingPathComponent(name))
        let size = (attributes?[.size] as? Int) ?? 0
        if name == "synchealth.sqlite" {
            bytes.database += size
        } else if name == "synchealth.sqlite-wal" {
            bytes.wal += size
        } else {
            bytes.journal += size
        }
    }
    return bytes
}

/// The database file's free pages, in MiB, as its header says (bytes 36-39: the freelist's page count; 16-17: the
/// page size). The header is as of the last checkpoint.
func freeMiB() -> Double {
    guard let handle = FileHandle(forReadingAtPath: (directory as NSString).appendingPathComponent("synchealth.sqlite")),
        let header = try? handle.read(upToCount: 100), header.count == 100
    else { return -1 }
    try? handle.close()
    let bytes = [UInt8](header)
    let pageSize = Int(bytes[16]) << 8 | Int(bytes[17])
    let free = bytes[36..<40].reduce(0) { $0 << 8 | Int($1) }
    return Double(free * (pageSize == 1 ? 65_536 : pageSize)) / 1_048_576
}

/// One device's daily post: two events with time-first ids, as the client's UUIDv7 are.
func post(_ device: Int, at now: Timestamp) -> EventBatch {
    let key = DeviceKey(appId: "com.bench.churn", deviceId: "dev-\(device)")
    let stamp = String(now.microseconds / 1000, radix: 16)
    return EventBatch(
        key: key,
        info: DeviceInfo(containerId: "iCloud.com.bench.churn", platform: "iOS", osVersion: "18.1", appVersion: "1.0"),
        events: [
            DeviceEvent(eventId: "\(stamp)-\(device)-n", occurredAt: now, body: .network(available: true)),
            DeviceEvent(eventId: "\(stamp)-\(device)-e", occurredAt: now, body: .activity(.init(phase: .export, state: .succeeded))),
        ]
    )
}

struct Sample {
    var day: Int
    var devices: Int
    var residentMiB: Double
    var diskMiB: Double
    var databaseMiB: Double
    var walMiB: Double
    var freeMiB: Double
}

func sample(day: Int) async throws -> Sample {
    // Let the pipeline serve what the last hour made due, and a fold run, before measuring.
    try await Task.sleep(for: .seconds(3))
    _ = cheap_trim(0)
    let devices = (engine as? LocalMonitor)?.deviceCount ?? -1
    let bytes = directoryBytes()
    return Sample(
        day: day,
        devices: devices,
        residentMiB: Double(cheap_resident_bytes()) / 1_048_576,
        diskMiB: Double(bytes.database + bytes.wal + bytes.journal) / 1_048_576,
        databaseMiB: Double(bytes.database) / 1_048_576,
        walMiB: Double(bytes.wal) / 1_048_576,
        freeMiB: freeMiB()
    )
}

let began = ContinuousClock.now
var samples: [Sample] = []
try await withThrowingTaskGroup(of: Void.self) { services in
    services.addTask { try await engine.run() }
    // A simulated day passes in about a second: free pages go back at the pace of the days, a tick at a time and
    // 4 MiB a step, where the service returns 512 KiB a second for days that last a day.
    var maintenance = store.maintenance(logger: logger, niceness: 0)
    maintenance.reclaimer.pagesPerStep = 1_024
    maintenance.reclaimEvery = .zero
    services.addTask { [maintenance] in try await maintenance.run() }
    while !engine.isReady { try await Task.sleep(for: .milliseconds(10)) }
    print("fleet \(fleet), churn \(churn) a day, forget after \(forgetDays) days, alert history \(historyDays) days, \(days) days")
    print("| day | devices kept | RSS (MiB) | data directory (MiB) | of which the database / its WAL (MiB) | free pages in the database (MiB) |")
    print("|---|---|---|---|---|---|")
    var active = Array(0..<fleet)
    var next = fleet
    for day in 0..<days {
        if day > 0 {
            active.removeFirst(churn)
            active += next..<(next + churn)
            next += churn
        }
        for hour in 0..<24 {
            let slice = active[(hour * active.count / 24)..<((hour + 1) * active.count / 24)]
            let now = clock.now
            try await withThrowingTaskGroup(of: Void.self) { posts in
                for device in slice { posts.addTask { _ = try await engine.ingest(post(device, at: now)) } }
                try await posts.waitForAll()
            }
            clock.advance(by: .seconds(3600))
        }
        if (day + 1) % 30 == 0 || day == days - 1 {
            let s = try await sample(day: day + 1)
            samples.append(s)
            print(
                String(
                    format: "| %d | %d | %.1f | %.1f | %.1f / %.1f | %.1f |",
                    s.day,
                    s.devices,
                    s.residentMiB,
                    s.diskMiB,
                    s.databaseMiB,
                    s.walMiB,
                    s.freeMiB
                )
            )
        }
    }
    services.cancelAll()
}
let filled = samples.first { $0.day >= forgetDays + historyDays }
for (name, first) in [("first month", samples.first), ("windows filled", filled)] {
    guard let first, let last = samples.last else { continue }
    print(
        String(
            format: "day %d against day %d (%@): devices %.2f, RSS %.2f, data directory %.2f (goal: within 10%%)",
            last.day,
            first.day,
            name,
            Double(last.devices) / Double(first.devices),
            last.residentMiB / first.residentMiB,
            last.diskMiB / first.diskMiB
        )
    )
}
print("\(Double((ContinuousClock.now - began).components.seconds)) s")
