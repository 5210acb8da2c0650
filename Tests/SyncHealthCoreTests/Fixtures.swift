import SyncHealthCore
import SyncHealthMonitorFixtures

/// A test clock: time moves only when the test says so.
struct ManualClock {
    var now: Timestamp
    init(_ start: Timestamp = t(0)) { now = start }
    mutating func advance(_ d: Duration) { now = now + d }
    mutating func advance(to t: Timestamp) { now = t }
}

/// The line of one device's `syncError` alerts, by device id.
func line(_ deviceId: String) -> AlertLine {
    .device(DeviceKey(appId: "com.example", deviceId: deviceId), .syncError)
}
