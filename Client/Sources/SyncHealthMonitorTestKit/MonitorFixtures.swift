public import SyncHealthMonitor

// Fixtures for tests of the device monitor, shared by the client's and the server's test targets (as
// swift-metrics shares MetricsTestKit).

/// A fixed base time plus `seconds`.
public func t(_ seconds: Double) -> Timestamp {
    Timestamp(microseconds: 1_795_000_000_000_000 + Int64(seconds * 1_000_000))
}

/// `CKError.networkFailure`, a transient error.
public let ckNetworkFailure = SyncErrorReport(domain: "CKErrorDomain", code: 4, message: "network failure")
/// `CKError.badContainer`, a developer error.
public let ckBadContainer = SyncErrorReport(domain: "CKErrorDomain", code: 5)
/// `CKError.quotaExceeded`, an error the user must act on.
public let ckQuota = SyncErrorReport(domain: "CKErrorDomain", code: 25)

/// Builds events with unique ids.
public struct EventFactory {
    /// The number of the last event made.
    public var next = 0

    /// A factory whose first event is `e-1`.
    public init() {}

    /// An event with the next id.
    public mutating func make(_ at: Timestamp, _ body: DeviceEvent.Body) -> DeviceEvent {
        next += 1
        return DeviceEvent(eventId: "e-\(next)", occurredAt: at, body: body)
    }
    /// A phase started.
    public mutating func started(_ phase: Phase, at: Timestamp) -> DeviceEvent {
        make(at, .activity(.init(phase: phase, state: .started)))
    }
    /// A phase succeeded.
    public mutating func succeeded(_ phase: Phase, at: Timestamp) -> DeviceEvent {
        make(at, .activity(.init(phase: phase, state: .succeeded)))
    }
    /// A phase failed.
    public mutating func failed(_ phase: Phase, at: Timestamp, error: SyncErrorReport?) -> DeviceEvent {
        make(at, .activity(.init(phase: phase, state: .failed, error: error)))
    }
    /// Network availability.
    public mutating func network(_ up: Bool, at: Timestamp) -> DeviceEvent { make(at, .network(available: up)) }
    /// Account status.
    public mutating func account(_ s: AccountStatus, at: Timestamp) -> DeviceEvent { make(at, .account(s)) }
}

/// Folds events into a fresh monitor, in the order given.
public func fold(_ events: [DeviceEvent]) -> MonitorState {
    var m = MonitorState()
    for e in events { m.apply(e, receivedAt: e.occurredAt) }
    return m
}

/// A healthy device: account available, network up, all three phases succeeded.
public func healthy(_ f: inout EventFactory) -> [DeviceEvent] {
    [
        f.account(.available, at: t(0)), f.network(true, at: t(0)),
        f.succeeded(.setup, at: t(1)), f.succeeded(.import, at: t(2)), f.succeeded(.export, at: t(3)),
    ]
}
