/// The device's sync state as CloudKitSyncMonitor shows it, computed by the monitor the server runs.
public struct SyncStatus: Sendable, Equatable {
    /// The monitor state behind the summary.
    public var state: MonitorState

    /// The one-word summary (`syncStateSummary` of CloudKitSyncMonitor).
    public var syncStateSummary: SyncStateSummary { state.summary }
    /// Whether sync is broken (an error, not syncing, or unknown).
    public var isBroken: Bool { state.summary.isBroken }
    /// Whether sync should be running and import never started.
    public var isNotSyncing: Bool { state.isNotSyncing }
    /// Whether an activity is in progress.
    public var isInProgress: Bool { state.isInProgress }
    /// The SF Symbol to show.
    public var symbolName: String { state.summary.symbolName }
    /// The symbol's colour (`color` of `SyncHealthStatus` is the SwiftUI `Color`).
    public var symbolColor: SyncSymbolColor { SyncSymbolColor(rawValue: state.summary.symbolColor) ?? .gray }
    /// The short text to show.
    public var description: String { state.summary.description }
    /// Setup's state, as `setupState` of CloudKitSyncMonitor.
    public var setupState: SyncState { state.setup.state }
    /// Import's state.
    public var importState: SyncState { state.importPhase.state }
    /// Export's state.
    public var exportState: SyncState { state.export.state }
    /// Setup's error, shown while the network is up.
    public var setupError: SyncErrorReport? { state.setupError }
    /// Import's error, shown while the network is up.
    public var importError: SyncErrorReport? { state.importError }
    /// Export's error, shown while the network is up.
    public var exportError: SyncErrorReport? { state.exportError }
    /// The error shown now (setup's, import's or export's, the worst class first), with its class.
    public var lastError: SyncErrorReport? {
        [setupError, importError, exportError].compactMap { $0 }.max { $0.errorClass < $1.errorClass }
    }
}

/// The colour of the status symbol, as CloudKitSyncMonitor colours it.
public enum SyncSymbolColor: String, Sendable, CaseIterable {
    /// Nothing wrong yet, or nothing to tell (no network, no account, not started, syncing).
    case gray
    /// Broken: an error, not syncing, or unknown.
    case red
    /// Synced.
    case green
}

/// How delivery to the server is going.
public struct DeliveryStatus: Sendable, Equatable {
    /// Events recorded and not yet acknowledged by the server.
    public var queuedEvents = 0
    /// Events dropped since start because the queue was full (the oldest go first).
    public var droppedEvents = 0
    /// Events the server refused one by one (listed in `rejected`), since start.
    public var rejectedEvents = 0
    /// Events the server acknowledged since start.
    public var deliveredEvents = 0
    /// The last failure, until a send succeeds; `.refused` stays until `updateIngestKey(_:)`.
    public var lastError: SyncHealthReporterError?
}
