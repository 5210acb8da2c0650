public import Foundation

/// Reports the app's sync events to a SyncHealth server, and keeps the device's sync status on the phone.
///
/// Most apps start the shared one in one line (`SyncHealth.start(configuration:)`); an app that wants an instance
/// of its own makes one here:
///
/// ```swift
/// let reporter = try SyncHealthReporter(configuration: .init(
///     endpoint: URL(string: "https://synchealth.example.com")!, ingestKey: "…",
///     containerId: "iCloud.com.example.notes"))
/// reporter.record(.network(available: false))
/// ```
///
/// `record` never blocks and never throws: it stamps the event (a time-ordered id, the time) and applies it to the
/// local monitor, and appends it to the inbox log; the delivery agent moves it into the queue before any attempt to
/// send it. Events leave
/// the queue only after the `202` that covers them. No network work runs on the caller's thread, and of the disk only
/// `record`'s one append (and, at start, reading the ends of the queue's files).
public final class SyncHealthReporter: Sendable {
    /// The configuration it was created with (the ingest key may have changed since, see `updateIngestKey`).
    public let configuration: Configuration
    let shared: Locked<Shared>
    let agent: DeliveryAgent
    private let wake: AsyncStream<Void>.Continuation
    private let loop: Task<Void, Never>?
    /// The storage directory this reporter holds, until shutdown (`nil` when it could not start).
    private let claimedDirectory: Locked<URL?>

    /// State that `record` and readers share with the delivery agent.
    struct Shared {
        var monitor = MonitorState()
        var ids = EventIdGenerator()
        /// Recorded events not yet on disk, in order.
        var inbox: [DeviceEvent] = []
        /// The inbox on disk: what `record` returned for survives a kill (`InboxLog`).
        var inboxLog: InboxLog?
        var delivery = DeliveryStatus()
        var observers: [UInt64: AsyncStream<SyncStatus>.Continuation] = [:]
        var handlers: [UInt64: @Sendable (SyncStatus, DeliveryStatus) -> Void] = [:]
        var nextObserver: UInt64 = 0
        var sources = EventSources()
        var isShutDown = false
        /// Why nothing is stored or sent (an invalid configuration, a directory in use); `nil` when delivering.
        var disabled: SyncHealthReporterError?

        /// The handlers to call with the status now.
        var handlerCalls: [() -> Void] {
            guard !handlers.isEmpty else { return [] }
            let status = SyncStatus(state: monitor)
            let delivery = delivery
            return handlers.values.map { handler in { handler(status, delivery) } }
        }
    }

    /// Starts a reporter: validates the configuration, then opens the queue and starts delivering in the
    /// background. Throws `SyncHealthReporterError.invalidConfiguration` only. `SyncHealth.start(configuration:)`
    /// is the same without the `throws`.
    public convenience init(configuration: Configuration) throws {
        try configuration.validate()
        self.init(starting: configuration)
    }

    /// Starts a reporter whatever the configuration: one that cannot deliver (an invalid configuration, a
    /// storage directory another reporter holds) still keeps the status on the device, sends nothing, and says
    /// why in `delivery.lastError` and the log.
    init(starting configuration: Configuration) {
        self.configuration = configuration
        var disabled: SyncHealthReporterError?
        do {
            try configuration.validate()
        } catch {
            disabled = error
        }
        if disabled == nil, !configuration.isEnabled {
            disabled = .notEnabled("Configuration.isEnabled is false")
        } else if disabled == nil, !configuration.reportsFromPreviewsAndTests, let host = configuration.platform.host {
            disabled = .notEnabled("\(host) (Configuration.reportsFromPreviewsAndTests)")
        }
        let directory = configuration.resolvedStorageDirectory
        if disabled == nil, !DirectoryClaims.claim(directory) {
            disabled = .storageInUse(directory.path)
        }
        claimedDirectory = Locked(disabled == nil ? directory : nil)
        var initial = Shared()
        initial.disabled = disabled
        if disabled == nil {
            initial.inboxLog = InboxLog(directory: directory, beforeWrite: configuration.platform.beforeQueueWrite)
            initial.ids = EventIdGenerator(after: EventQueue.lastStoredId(in: directory))
        }
        initial.delivery.lastError = disabled
        let shared = Locked(initial)
        self.shared = shared
        let (wakes, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.wake = wake
        let agent = DeliveryAgent(configuration: configuration, shared: shared)
        self.agent = agent
        if let disabled {
            configuration.log("not reporting: \(disabled)")
            loop = nil
            wake.finish()
        } else {
            loop = Task.detached(priority: .utility) { await agent.run(wakes: wakes) }
        }
        if configuration.heartbeatOnStart { record(.heartbeat) }
        startPlatformSources()
    }

    deinit {
        loop?.cancel()
        // A reporter dropped without `shutdown()` stops its observers and its network monitor too: they hold it
        // weakly, and would otherwise run for the process's life.
        shared.withLock { $0.sources.stop() }
        releaseDirectory()
    }

    /// Gives the storage directory back, once: a reporter shut down long ago must not release the claim of the
    /// reporter that took the directory since.
    private func releaseDirectory() {
        let directory = claimedDirectory.withLock { claimed in
            defer { claimed = nil }
            return claimed
        }
        if let directory { DirectoryClaims.release(directory) }
    }

    /// Records an event: never throws, and never waits for the network. `date` is when it happened (now by
    /// default).
    ///
    /// When it returns, the event is on disk (one small append, no `fsync`): the app may be killed, crash or be
    /// suspended at once and the event is still sent on a later launch. Only when the disk refuses the write (full,
    /// or protected while the device is locked) is it kept in memory until the queue can take it.
    ///
    /// A date that is not a number is taken as now, and any other is clamped to 1970-01-01 … 9999-12-31, the
    /// range the server accepts.
    public func record(_ event: SyncEvent, at date: Date = Date()) {
        let date = Self.representable(date)
        let (status, observers, calls) = shared.withLock {
            s -> (SyncStatus?, [AsyncStream<SyncStatus>.Continuation], [() -> Void]) in
            guard !s.isShutDown else { return (nil, [], []) }
            let millis = UInt64(date.timeIntervalSince1970 * 1000)
            let id = s.ids.next(unixMillis: millis)
            let deviceEvent = event.deviceEvent(id: id, at: date, clientSummary: s.monitor.summary)
            let before = s.monitor
            s.monitor.apply(deviceEvent, receivedAt: Timestamp(date))
            if s.disabled == nil {
                s.inbox.append(deviceEvent)
                try? s.inboxLog?.append(id: deviceEvent.eventId, json: EventJSON.encode(deviceEvent))
            }
            guard s.monitor != before else { return (nil, [], []) }
            return (SyncStatus(state: s.monitor), Array(s.observers.values), s.handlerCalls)
        }
        wake.yield()
        if let status { for observer in observers { observer.yield(status) } }
        for call in calls { call() }
        if case .activity(_, .succeeded, _, _, _, _) = event { syncSucceeded() }
    }

    /// Sends what is queued now, as `flush()` does, but returns within `limit` whatever the network does: when the
    /// time runs out the send under way is cancelled, what was not acknowledged stays queued (sent later, never
    /// lost), and it throws `deliveryFailed`. For handlers the system ends on a clock: a silent push has 30 s of
    /// wall time, a background task until its expiration handler runs.
    public func flush(within limit: Duration) async throws {
        let outcome = Locked<CheckedContinuation<Void, any Error>?>(nil)
        let finish = { @Sendable (result: Result<Void, any Error>) in
            outcome.withLock { continuation in
                continuation?.resume(with: result)
                continuation = nil
            }
        }
        let reporter = self
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            outcome.withLock { $0 = continuation }
            let work = Task.detached(priority: .userInitiated) {
                do {
                    try await reporter.flush()
                    finish(.success(()))
                } catch {
                    finish(.failure(error))
                }
            }
            Task.detached(priority: .userInitiated) {
                try? await Task.sleep(for: limit)
                // The answer first: the cancelled send would otherwise answer with its `CancellationError`.
                finish(.failure(SyncHealthReporterError.deliveryFailed("not everything was sent within \(limit); the rest stays queued")))
                work.cancel()
            }
        }
    }

    /// The last second an RFC 3339 date can name: 9999-12-31T23:59:59Z.
    static let latestSecond: TimeInterval = 253_402_300_799

    /// `date` within what an event can carry: now for NaN, else clamped to the Unix epoch … `latestSecond`.
    static func representable(_ date: Date) -> Date {
        let seconds = date.timeIntervalSince1970
        guard !seconds.isNaN else { return Date() }
        return Date(timeIntervalSince1970: min(max(seconds, 0), latestSecond))
    }

    /// Sends what is queued now, at once (without waiting for the send interval). Throws if it could not; the
    /// events stay queued and are retried.
    public func flush() async throws {
        if let disabled = shared.withLock({ $0.disabled }) { throw disabled }
        try await agent.flush()
    }

    /// Whether `shutdown()` was called.
    var isShutDown: Bool { shared.withLock { $0.isShutDown } }

    /// Stops delivering; what is not yet sent stays in the queue for the next start. Records after this are ignored.
    public func shutdown() async {
        let (observers, wasShutDown) = shared.withLock { s in
            defer { s.isShutDown = true }
            let observers = Array(s.observers.values)
            s.observers = [:]
            s.handlers = [:]
            s.sources.stop()
            return (observers, s.isShutDown)
        }
        for observer in observers { observer.finish() }
        guard !wasShutDown else { return }
        if let loop {
            await agent.persistInbox()
            loop.cancel()
            wake.finish()
            await loop.value
        }
        releaseDirectory()
    }

    /// Replaces the ingest key, for example after the server refused the old one; sending resumes.
    public func updateIngestKey(_ key: String) async {
        await agent.updateIngestKey(key)
        wake.yield()
    }

    /// The device's sync status now.
    public var status: SyncStatus { shared.withLock { SyncStatus(state: $0.monitor) } }

    /// The summary now; shorthand for `status.syncStateSummary`.
    public var syncStateSummary: SyncStateSummary { status.syncStateSummary }
    /// Whether sync is broken now.
    public var isBroken: Bool { status.isBroken }
    /// Whether sync should run and import never started.
    public var isNotSyncing: Bool { status.isNotSyncing }

    /// How delivery is going.
    public var delivery: DeliveryStatus { shared.withLock { $0.delivery } }

    /// The status now, then each time it changes, until the reporter shuts down or the consumer stops.
    public func statusUpdates() -> AsyncStream<SyncStatus> {
        let (stream, continuation) = AsyncStream<SyncStatus>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = shared.withLock { s -> UInt64? in
            guard !s.isShutDown else { return nil }
            s.nextObserver += 1
            s.observers[s.nextObserver] = continuation
            continuation.yield(SyncStatus(state: s.monitor))
            return s.nextObserver
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.shared.withLock { $0.observers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Calls `handler` with the status and the delivery status now, then on every change of either, on the
    /// thread that made the change, until `removeStatusHandler` or shutdown. For `SyncHealthStatus`.
    func addStatusHandler(_ handler: @escaping @Sendable (SyncStatus, DeliveryStatus) -> Void) -> UInt64 {
        let (id, status, delivery) = shared.withLock { s in
            s.nextObserver += 1
            if !s.isShutDown { s.handlers[s.nextObserver] = handler }
            return (s.nextObserver, SyncStatus(state: s.monitor), s.delivery)
        }
        handler(status, delivery)
        return id
    }

    /// Stops calling a handler.
    func removeStatusHandler(_ id: UInt64) {
        _ = shared.withLock { $0.handlers.removeValue(forKey: id) }
    }

    /// Deletes what the reporter keeps on this device, for a user who asks to be forgotten: the events not yet
    /// sent (they are never sent), the stored random device id, and the status the device computed, which starts
    /// again as at a first launch (with the network and account as last read). Reporting goes on: later events
    /// open a new queue under a new random id, which the server sees as a new device. What was sent before stays
    /// on the server until your backend erases it there (`DELETE /v1/devices/{deviceId}?appId=…` with an admin
    /// key, which must not ship in the app): read ``deviceId()`` first, and send it to your backend. Throws when a
    /// file cannot be deleted.
    public func eraseLocalData() async throws {
        if let disabled = shared.withLock({ $0.disabled }) { throw disabled }
        try await agent.erase()
        let (status, observers, calls, network, account) = shared.withLock { s in
            s.monitor = MonitorState()
            s.ids = EventIdGenerator()
            s.sources.syncEngine = SyncEngineMapping()
            return (SyncStatus(state: s.monitor), Array(s.observers.values), s.handlerCalls, s.sources.lastNetwork, s.sources.lastAccount)
        }
        for observer in observers { observer.yield(status) }
        for call in calls { call() }
        if let network { record(.network(available: network)) }
        if let account { record(.account(status: account)) }
    }

    /// The device id in use (the configured one, or the stored random one).
    public func deviceId() async throws -> String {
        if let disabled = shared.withLock({ $0.disabled }) { throw disabled }
        return try await agent.deviceId()
    }
}
