/// The state of one sync phase, as CloudKitSyncMonitor keeps it.
public enum SyncState: Hashable, Sendable {
    /// No event of this phase yet.
    case notStarted
    /// Started and not ended.
    case inProgress(startedAt: Timestamp)
    /// Ended successfully.
    case succeeded(startedAt: Timestamp, endedAt: Timestamp)
    /// Ended with a failure, with or without an error.
    case failed(startedAt: Timestamp, endedAt: Timestamp, error: SyncErrorReport?)

    /// The status name used in the API.
    public var status: Status {
        switch self {
        case .notStarted: .notStarted
        case .inProgress: .inProgress
        case .succeeded: .succeeded
        case .failed: .failed
        }
    }

    /// When the activity started, if it did.
    public var startedAt: Timestamp? {
        switch self {
        case .notStarted: nil
        case .inProgress(let s), .succeeded(let s, _), .failed(let s, _, _): s
        }
    }

    /// When the activity ended, if it did.
    public var endedAt: Timestamp? {
        switch self {
        case .notStarted, .inProgress: nil
        case .succeeded(_, let e), .failed(_, let e, _): e
        }
    }

    /// The failure's error, if any.
    public var error: SyncErrorReport? {
        if case .failed(_, _, let error) = self { return error }
        return nil
    }

    /// The four status names of the API.
    public enum Status: String, CaseIterable, Sendable, Codable {
        case notStarted
        case inProgress
        case succeeded
        case failed
    }
}

/// One phase's slot: its state and the device time of the event that last set it.
public struct PhaseSlot: Hashable, Sendable {
    /// The phase's state.
    public var state: SyncState = .notStarted
    /// `occurredAt` of the event that set `state`; older events do not overwrite it.
    @PackedTimestamp public var setAt: Timestamp?

    /// An empty slot.
    public init(state: SyncState = .notStarted, setAt: Timestamp? = nil) {
        self.state = state
        self.setAt = setAt
    }
}
