import SyncHealthCore

/// A test clock: time moves only when the test says so.
struct ManualClock {
    var now: Timestamp
    init(_ start: Timestamp = t(0)) { now = start }
    mutating func advance(_ d: Duration) { now = now + d }
    mutating func advance(to t: Timestamp) { now = t }
}

/// A fixed base time plus `seconds`.
func t(_ seconds: Double) -> Timestamp {
    Timestamp(microseconds: 1_795_000_000_000_000 + Int64(seconds * 1_000_000))
}

/// The line of one device's `syncError` alerts, by device id.
func line(_ deviceId: String) -> AlertLine {
    .device(DeviceKey(appId: "com.example", deviceId: deviceId), .syncError)
}

let ckNetworkFailure = SyncErrorReport(domain: "CKErrorDomain", code: 4, message: "network failure")
let ckBadContainer = SyncErrorReport(domain: "CKErrorDomain", code: 5)
let ckQuota = SyncErrorReport(domain: "CKErrorDomain", code: 25)

/// Builds events with unique ids.
struct EventFactory {
    var next = 0
    mutating func make(_ at: Timestamp, _ body: DeviceEvent.Body) -> DeviceEvent {
        next += 1
        return DeviceEvent(eventId: "e-\(next)", occurredAt: at, body: body)
    }
    mutating func started(_ phase: Phase, at: Timestamp) -> DeviceEvent {
        make(at, .activity(.init(phase: phase, state: .started)))
    }
    mutating func succeeded(_ phase: Phase, at: Timestamp) -> DeviceEvent {
        make(at, .activity(.init(phase: phase, state: .succeeded)))
    }
    mutating func failed(_ phase: Phase, at: Timestamp, error: SyncErrorReport?) -> DeviceEvent {
        make(at, .activity(.init(phase: phase, state: .failed, error: error)))
    }
    mutating func network(_ up: Bool, at: Timestamp) -> DeviceEvent { make(at, .network(available: up)) }
    mutating func account(_ s: AccountStatus, at: Timestamp) -> DeviceEvent { make(at, .account(s)) }
}

/// Folds events into a fresh monitor, in the order given.
func fold(_ events: [DeviceEvent]) -> MonitorState {
    var m = MonitorState()
    for e in events { m.apply(e, receivedAt: e.occurredAt) }
    return m
}

/// A healthy device: account available, network up, all three phases succeeded.
func healthy(_ f: inout EventFactory) -> [DeviceEvent] {
    [f.account(.available, at: t(0)), f.network(true, at: t(0)),
     f.succeeded(.setup, at: t(1)), f.succeeded(.import, at: t(2)), f.succeeded(.export, at: t(3))]
}
