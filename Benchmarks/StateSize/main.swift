import SyncHealthCore

// Measures the bytes of monitor state per device: the inline size of a DeviceRecord, and the resident
// memory that one million typical records really take (their id strings are short enough to be stored
// inline, so what is measured is the state besides the ids).
#if canImport(Glibc)
import Glibc
#endif

func residentBytes() -> Int {
    guard let file = fopen("/proc/self/statm", "r") else { return 0 }
    defer { fclose(file) }
    var size = 0
    var resident = 0
    _ = withUnsafeMutablePointer(to: &size) { s in
        withUnsafeMutablePointer(to: &resident) { r in
            withVaList([s, r]) { vfscanf(file, "%ld %ld", $0) }
        }
    }
    return resident * Int(sysconf(Int32(_SC_PAGESIZE)))
}

let count = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 1_000_000
let base = Timestamp(rfc3339: "2026-11-22T10:00:00Z") ?? Timestamp(microseconds: 0)
let shared = SyncErrorReport(domain: "CKErrorDomain", code: 3)

print("MemoryLayout<DeviceRecord>: size \(MemoryLayout<DeviceRecord>.size) B, stride \(MemoryLayout<DeviceRecord>.stride) B")
print("MemoryLayout<MonitorState>: size \(MemoryLayout<MonitorState>.size) B")

let before = residentBytes()
var records: [DeviceRecord] = []
records.reserveCapacity(count)
for i in 0..<count {
    // Ids of up to 15 bytes are stored inline in the String, so no id storage is counted here.
    var record = DeviceRecord(key: DeviceKey(appId: "app", deviceId: "d\(i)"), info: DeviceInfo(containerId: "iCloud.x"), firstSeenAt: base)
    var events: [DeviceEvent] = [
        DeviceEvent(eventId: "a", occurredAt: base, body: .account(.available)),
        DeviceEvent(eventId: "b", occurredAt: base, body: .network(available: true)),
        DeviceEvent(eventId: "c", occurredAt: base, body: .activity(.init(phase: .setup, state: .succeeded))),
        DeviceEvent(eventId: "d", occurredAt: base, body: .activity(.init(phase: .import, state: .succeeded))),
    ]
    // One device in ten has a failed export with its own error object.
    if i % 10 == 0 {
        events.append(
            DeviceEvent(
                eventId: "e",
                occurredAt: base,
                body: .activity(
                    .init(
                        phase: .export,
                        state: .failed,
                        error: SyncErrorReport(domain: "CKErrorDomain", code: 25, message: "Quota exceeded")
                    )
                )
            )
        )
    } else {
        events.append(DeviceEvent(eventId: "e", occurredAt: base, body: .activity(.init(phase: .export, state: .succeeded))))
    }
    _ = record.ingest(events, info: DeviceInfo(), now: base)
    records.append(record)
}
let after = residentBytes()
print("devices: \(count)")
print("resident bytes per device (state besides ids): \((after - before) / count) B")
withExtendedLifetime(records) {}
