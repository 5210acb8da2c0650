public import Foundation

/// Reports the app's sync events to a SyncHealth server, and keeps the device's sync status on the phone.
///
/// ```swift
/// let reporter = try SyncHealthReporter(configuration: .init(
///     endpoint: URL(string: "https://synchealth.example.com")!, ingestKey: "…",
///     appId: "com.example.notes", containerId: "iCloud.com.example.notes"))
/// reporter.record(.network(available: false))
/// ```
///
/// `record` never blocks and never throws: it stamps the event (a time-ordered id, the time) and applies it to the
/// local monitor; the delivery agent appends it to the on-disk queue before any attempt to send it. Events leave
/// the queue only after the `202` that covers them. No disk or network work runs on the caller's thread.
public final class SyncHealthReporter: Sendable {
    /// The configuration it was created with (the ingest key may have changed since, see `updateIngestKey`).
    public let configuration: Configuration
    let shared: Locked<Shared>
    let agent: DeliveryAgent
    private let wake: AsyncStream<Void>.Continuation
    private let loop: Task<Void, Never>

    /// State that `record` and readers share with the delivery agent.
    struct Shared {
        var monitor = MonitorState()
        var ids = EventIdGenerator()
        /// Recorded events not yet on disk, in order.
        var inbox: [DeviceEvent] = []
        var delivery = DeliveryStatus()
        var observers: [UInt64: AsyncStream<SyncStatus>.Continuation] = [:]
        var nextObserver: UInt64 = 0
        var sources = EventSources()
        var isShutDown = false
    }

    /// Starts a reporter: validates the configuration, then opens the queue and starts delivering in the
    /// background. Throws `SyncHealthReporterError.invalidConfiguration` only.
    public init(configuration: Configuration) throws {
        try configuration.validate()
        self.configuration = configuration
        let shared = Locked(Shared())
        self.shared = shared
        let (wakes, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.wake = wake
        let agent = DeliveryAgent(configuration: configuration, shared: shared)
        self.agent = agent
        loop = Task.detached(priority: .utility) { await agent.run(wakes: wakes) }
        if configuration.heartbeatOnStart { record(.heartbeat) }
        startPlatformSources()
    }

    deinit {
        loop.cancel()
    }

    /// Records an event: never blocks, never throws. `date` is when it happened (now by default).
    public func record(_ event: SyncEvent, at date: Date = Date()) {
        let (status, observers) = shared.withLock { s -> (SyncStatus?, [AsyncStream<SyncStatus>.Continuation]) in
            guard !s.isShutDown else { return (nil, []) }
            let millis = UInt64(max(0, date.timeIntervalSince1970 * 1000))
            let id = s.ids.next(unixMillis: millis)
            let deviceEvent = event.deviceEvent(id: id, at: date, clientSummary: s.monitor.summary)
            let before = s.monitor
            s.monitor.apply(deviceEvent, receivedAt: Timestamp(date))
            s.inbox.append(deviceEvent)
            return s.monitor == before ? (nil, []) : (SyncStatus(state: s.monitor), Array(s.observers.values))
        }
        wake.yield()
        if let status { for observer in observers { observer.yield(status) } }
    }

    /// Sends what is queued now, at once (without waiting for the send interval). Throws if it could not; the
    /// events stay queued and are retried.
    public func flush() async throws {
        try await agent.flush()
    }

    /// Stops delivering; what is not yet sent stays in the queue for the next start. Records after this are ignored.
    public func shutdown() async {
        let observers = shared.withLock { s in
            s.isShutDown = true
            let observers = Array(s.observers.values)
            s.observers = [:]
            s.sources.stop()
            return observers
        }
        for observer in observers { observer.finish() }
        await agent.persistInbox()
        loop.cancel()
        wake.finish()
        await loop.value
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

    /// The device id in use (the configured one, or the stored random one).
    public func deviceId() async throws -> String {
        try await agent.deviceId()
    }

    /// Records the start of an activity of `phase`, runs `body`, and records its end: succeeded, or failed with
    /// the error `body` threw. For sync engines without notifications of their own (SyncKit, Cirrus, your own).
    public func track<T>(_ phase: Phase, _ body: () async throws -> T) async rethrows -> T {
        let activityId = UUID().uuidString
        let started = Date()
        record(.activity(phase: phase, state: .started, activityId: activityId, startedAt: started), at: started)
        do {
            let value = try await body()
            record(.activity(phase: phase, state: .succeeded, activityId: activityId, startedAt: started))
            return value
        } catch {
            record(.activity(phase: phase, state: .failed, activityId: activityId, startedAt: started, error: SyncErrorReport(error: error)))
            throw error
        }
    }
}
