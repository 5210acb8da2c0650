/// A device's monitor state, the same that CloudKitSyncMonitor keeps on the phone, rebuilt from posted events.
///
/// Every slot is last-writer-wins on the device's `occurredAt`, so the order in which events arrive does not
/// matter: an event older than the one that last set a slot does not overwrite it.
public struct MonitorState: Hashable, Sendable {
    /// The setup phase.
    public var setup = PhaseSlot()
    /// The import phase.
    public var importPhase = PhaseSlot()
    /// The export phase.
    public var export = PhaseSlot()
    /// Network availability; `nil` until reported.
    public var network: Bool?
    /// Device time of the event that set `network`.
    @PackedTimestamp public var networkSetAt: Timestamp? = nil
    /// iCloud account status; `nil` until reported.
    public var account: AccountStatus?
    /// Device time of the event that set `account`.
    @PackedTimestamp public var accountSetAt: Timestamp? = nil
    /// The most recent error of any failed activity; sticky.
    public var lastSyncError: SyncErrorReport?
    /// Device time of the event that set `lastSyncError`.
    @PackedTimestamp public var lastSyncErrorAt: Timestamp? = nil
    /// Local changes waiting for export, as last reported.
    public var pendingChanges: Int = 0
    /// The oldest pending change, on the device's clock, as reported.
    @PackedTimestamp public var oldestPendingAt: Timestamp? = nil
    /// The oldest pending change translated to the service's clock (see `apply`).
    @PackedTimestamp public var oldestPendingObservedAt: Timestamp? = nil
    /// Device time of the event that set the pending values.
    @PackedTimestamp public var pendingSetAt: Timestamp? = nil
    /// The summary the device last computed itself (from a heartbeat), if any.
    public var clientSummary: SyncStateSummary?

    /// An empty state: nothing reported yet.
    public init() {}

    /// The slot of a phase.
    public subscript(phase: Phase) -> PhaseSlot {
        get {
            switch phase {
            case .setup: setup
            case .import: importPhase
            case .export: export
            }
        }
        set {
            switch phase {
            case .setup: setup = newValue
            case .import: importPhase = newValue
            case .export: export = newValue
            }
        }
    }
}

extension MonitorState {
    /// What applying one event did.
    public enum ApplyOutcome: Sendable, Equatable {
        /// The event changed (or re-set) a slot.
        case applied
        /// The event was older than what its slot holds, and was ignored.
        case stale
    }

    /// Applies one event, last-writer-wins per slot on `occurredAt`.
    ///
    /// - Parameters:
    ///   - event: the event, with `occurredAt` already corrected for clock skew by the caller.
    ///   - receivedAt: the service's time of receipt, used to place a pending change on the service's clock.
    @discardableResult
    public mutating func apply(_ event: DeviceEvent, receivedAt: Timestamp) -> ApplyOutcome {
        let at = event.occurredAt
        switch event.body {
        case .activity(let activity):
            // lastSyncError is a register of its own: a failure can be stale for its phase and still be the
            // most recent error of all.
            var errorApplied = false
            if let error = activity.error, activity.state == .failed, Self.isFresh(at, over: lastSyncErrorAt) {
                lastSyncError = error
                lastSyncErrorAt = at
                errorApplied = true
            }
            var slot = self[activity.phase]
            guard Self.isFresh(at, over: slot.setAt) else { return errorApplied ? .applied : .stale }
            switch activity.state {
            case .started:
                slot.state = .inProgress(startedAt: activity.startedAt ?? at)
            case .succeeded, .failed:
                // The contract's default is the event's own time. Inheriting the start of the activity in
                // progress would make the state depend on arrival order, so it is not done.
                let startedAt = activity.startedAt ?? at
                let endedAt = activity.endedAt ?? at
                if activity.state == .succeeded {
                    slot.state = .succeeded(startedAt: startedAt, endedAt: endedAt)
                } else {
                    slot.state = .failed(startedAt: startedAt, endedAt: endedAt, error: activity.error)
                }
            }
            slot.setAt = at
            self[activity.phase] = slot
        case .network(let available):
            guard Self.isFresh(at, over: networkSetAt) else { return .stale }
            network = available
            networkSetAt = at
        case .account(let status):
            guard Self.isFresh(at, over: accountSetAt) else { return .stale }
            account = status
            accountSetAt = at
        case .pending(let count, let oldest):
            guard Self.isFresh(at, over: pendingSetAt) else { return .stale }
            pendingChanges = count
            oldestPendingAt = count > 0 ? oldest : nil
            pendingSetAt = at
            if count > 0 {
                // The device says its oldest change is (occurredAt - oldest) old; place that age on our clock,
                // so that a device clock that is off by hours does not move the deadline.
                let age = oldest.map { max(.zero, at - $0) } ?? .zero
                oldestPendingObservedAt = receivedAt - age
            } else {
                oldestPendingObservedAt = nil
            }
        case .heartbeat(let summary):
            if let summary { clientSummary = summary }
        }
        return .applied
    }

    /// An event at `time` may overwrite a slot set at `setAt` unless it is older (ties go to the later arrival).
    @inlinable
    static func isFresh(_ time: Timestamp, over setAt: Timestamp?) -> Bool {
        guard let setAt else { return true }
        return time >= setAt
    }
}
