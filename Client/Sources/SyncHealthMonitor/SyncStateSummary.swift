/// The one-word summary of a device's sync state, as CloudKitSyncMonitor's `syncStateSummary`.
public enum SyncStateSummary: String, CaseIterable, Sendable, Codable {
    case noNetwork
    case accountNotAvailable
    case error
    case notSyncing
    case notStarted
    case inProgress
    case succeeded
    case unknown

    /// Whether the summary means sync is broken.
    public var isBroken: Bool {
        switch self {
        case .error, .notSyncing, .unknown: true
        default: false
        }
    }

    /// The SF Symbol CloudKitSyncMonitor shows.
    public var symbolName: String {
        switch self {
        case .noNetwork, .notStarted: "bolt.horizontal.icloud"
        case .accountNotAvailable: "lock.icloud"
        case .error: "exclamationmark.icloud"
        case .notSyncing: "xmark.icloud"
        case .inProgress: "arrow.clockwise.icloud"
        case .succeeded: "icloud"
        case .unknown: "icloud.slash"
        }
    }

    /// The symbol's colour.
    public var symbolColor: String {
        switch self {
        case .noNetwork, .accountNotAvailable, .notStarted, .inProgress: "gray"
        case .error, .notSyncing, .unknown: "red"
        case .succeeded: "green"
        }
    }

    /// The short text CloudKitSyncMonitor shows.
    public var description: String {
        switch self {
        case .noNetwork: "No network available"
        case .accountNotAvailable: "No iCloud account"
        case .error: "Error"
        case .notSyncing: "Not syncing to iCloud"
        case .notStarted: "Sync not started"
        case .inProgress: "Syncing..."
        case .succeeded: "Synced with iCloud"
        case .unknown: "Error"
        }
    }
}

extension MonitorState {
    /// The phase's error, shown only while the network is known to be available (parity).
    public func visibleError(_ phase: Phase) -> SyncErrorReport? {
        guard network == true, case .failed(_, _, let error?) = self[phase].state else { return nil }
        return error
    }

    /// `setupError` of CloudKitSyncMonitor.
    public var setupError: SyncErrorReport? { visibleError(.setup) }
    /// `importError` of CloudKitSyncMonitor.
    public var importError: SyncErrorReport? { visibleError(.import) }
    /// `exportError` of CloudKitSyncMonitor.
    public var exportError: SyncErrorReport? { visibleError(.export) }

    /// Whether any phase shows an error.
    public var hasSyncError: Bool { setupError != nil || importError != nil || exportError != nil }

    /// The worst class among the visible errors, if any.
    public var syncErrorClass: ErrorClass? {
        [setupError, importError, exportError].compactMap { $0?.errorClass }.max()
    }

    /// Account available, network up, no error, and setup succeeded.
    public var shouldBeSyncing: Bool {
        guard account == .available, network == true, !hasSyncError else { return false }
        if case .succeeded = setup.state { return true }
        return false
    }

    /// Import has not started although everything says it should have.
    public var isNotSyncing: Bool {
        importPhase.state == .notStarted && shouldBeSyncing
    }

    /// The summary, by the first matching rule of monitor-semantics.md.
    public var summary: SyncStateSummary {
        if network == false { return .noNetwork }
        if let account, account != .available { return .accountNotAvailable }
        if hasSyncError { return .error }
        if isNotSyncing { return .notSyncing }
        let states = (setup.state.status, importPhase.state.status, export.state.status)
        if states == (.notStarted, .notStarted, .notStarted) { return .notStarted }
        if states.0 == .inProgress || states.1 == .inProgress || states.2 == .inProgress { return .inProgress }
        if states.1 == .succeeded && states.2 == .succeeded { return .succeeded }
        return .unknown
    }

    /// `summary == .inProgress`.
    public var isInProgress: Bool { summary == .inProgress }

    /// Whether `summary` is `unknown` only because of one of the parity quirks that are not real trouble:
    /// import succeeded before any export ran, a phase failed without an error, a failure while the network
    /// was unknown, or setup failed before import and export started.
    public var isUnknownFromQuirk: Bool {
        if importPhase.state.status == .succeeded && export.state.status == .notStarted { return true }
        return setup.state.status == .failed || importPhase.state.status == .failed || export.state.status == .failed
    }
}
