#if canImport(Observation)
import Dispatch
public import Observation

/// The device's sync status for views: an `@Observable` model on the main actor, updated as the reporter's
/// status and delivery change.
///
/// ```swift
/// struct SettingsView: View {
///     let sync = SyncHealthStatus.shared
///     var body: some View {
///         Label(sync.description, systemImage: sync.symbolName).foregroundStyle(sync.color)
///     }
/// }
/// ```
@MainActor
@Observable
public final class SyncHealthStatus {
    /// The status as CloudKitSyncMonitor computes it, by the monitor the server runs.
    public private(set) var status: SyncStatus
    /// How delivery to the server is going.
    public private(set) var delivery: DeliveryStatus

    @ObservationIgnored private let reporter: SyncHealthReporter?
    /// The reporter's handler id, kept in a lock so that the (nonisolated) `deinit` can read it.
    @ObservationIgnored private let handler = Locked<UInt64?>(nil)

    /// The model of `reporter`'s status; with `nil`, a status that stays `unknown` (nothing started).
    public init(reporter: SyncHealthReporter?) {
        self.reporter = reporter
        status = reporter?.status ?? SyncStatus(state: MonitorState())
        delivery = reporter?.delivery ?? DeliveryStatus()
        let id = reporter?.addStatusHandler { [weak self] _, _ in
            // Read here, in the handler itself: a weak capture must not be read from a closure nested in it.
            let model = self
            // The block reads the reporter's status when it runs, not the one this call was made with: calls from
            // different threads reach the main queue in any order, and the last block to run must show the latest.
            DispatchQueue.main.async {
                MainActor.assumeIsolated { model?.refresh() }
            }
        }
        handler.withLock { $0 = id }
    }

    deinit {
        if let id = handler.withLock({ $0 }) { reporter?.removeStatusHandler(id) }
    }

    /// The model of `SyncHealth.shared`, made on first use (and again if another reporter was started since).
    public static var shared: SyncHealthStatus {
        let reporter = SyncHealth.shared
        if let current = sharedModel, current.reporter === reporter { return current }
        let model = SyncHealthStatus(reporter: reporter)
        sharedModel = model
        return model
    }
    private static var sharedModel: SyncHealthStatus?

    /// Shows the reporter's status now.
    func refresh() {
        guard let reporter else { return }
        update(reporter.status, reporter.delivery)
    }

    private func update(_ status: SyncStatus, _ delivery: DeliveryStatus) {
        if status != self.status { self.status = status }
        if delivery != self.delivery { self.delivery = delivery }
    }

    /// The one-word summary (`syncStateSummary` of CloudKitSyncMonitor).
    public var syncStateSummary: SyncStateSummary { status.syncStateSummary }
    /// Whether sync is broken (an error, not syncing, or unknown).
    public var isBroken: Bool { status.isBroken }
    /// The SF Symbol to show.
    public var symbolName: String { status.symbolName }
    /// The symbol's colour.
    public var symbolColor: SyncSymbolColor { status.symbolColor }
    /// The short text to show.
    public var description: String { status.description }
    /// The error shown now, if any.
    public var lastError: SyncErrorReport? { status.lastError }
    /// The class of the error shown now: who must act (the developer, the user) or nobody (transient).
    public var lastErrorClass: ErrorClass? { status.lastError?.errorClass }
    /// Why reports are not reaching the server, if they are not (`delivery.lastError`).
    public var reportingError: SyncHealthReporterError? { delivery.lastError }
}
#endif
