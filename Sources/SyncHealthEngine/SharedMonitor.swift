public import Logging
public import SyncHealthCore
public import SyncHealthStore
import Synchronization

/// The monitor over a store that several replicas share (PostgreSQL).
///
/// Nothing about devices is cached: each group locks its devices in the store, reads them, plans on them with the
/// same `GroupPlan` as `LocalMonitor`, and writes the result in the same transaction. Timers are the store's
/// due-time column, claimed with `SKIP LOCKED`, so a replica serves the timers of one that died. Reads go to the
/// store. Only the notification policy (flapping, fleet hold-back counts) is per replica: a group decides on it in
/// place, keeps its changes after the commit, and takes them back when an attempt fails.
public final class SharedMonitor: MonitorEngine, GroupPipeline {
    public let configuration: EngineConfiguration
    public let clock: any ServiceClock
    public let webhooks: WebhookCenter
    let store: any SharedSyncStore
    public let feed = LiveFeed()
    let logger: Logger
    let metrics: EngineMetrics
    let queue: IngestQueue
    let policy: Mutex<NotificationPolicy>

    /// Creates a monitor over `store`. Call `run()` (as a service) to prepare the store and serve.
    public init(
        store: any SharedSyncStore,
        clock: any ServiceClock,
        configuration: EngineConfiguration = EngineConfiguration(),
        webhooks: WebhookCenter,
        logger: Logger
    ) {
        self.store = store
        self.clock = clock
        self.configuration = configuration
        self.webhooks = webhooks
        self.logger = logger
        self.metrics = EngineMetrics()
        self.queue = IngestQueue(capacity: configuration.maxQueuedRequests, metrics: metrics)
        self.policy = Mutex(NotificationPolicy(configuration: configuration.notifications))
    }

    public func run() async throws { try await runPipeline() }

    public var isReady: Bool { queue.isReady }

    // MARK: Writes and reads

    public func ingest(_ batch: EventBatch) async throws(EngineError) -> IngestReceipt {
        try await queue.submit(batch)
    }

    public func device(_ key: DeviceKey) async throws(EngineError) -> DeviceSnapshot? {
        try queue.checkReadable()
        let now = clock.now
        return try await read { try await store.device(key) }.map { DeviceSnapshot(record: $0, now: now, configuration: configuration.alerts) }
    }

    public func devices(withId deviceId: String) async throws(EngineError) -> [DeviceKey] {
        try queue.checkReadable()
        return try await read { try await store.deviceKeys(deviceId: deviceId) }
    }

    public func devices(_ filter: DeviceFilter, after cursor: Int, limit: Int) async throws(EngineError) -> DevicePage {
        try queue.checkReadable()
        let now = clock.now
        // The platform and version filters are applied here, to pages of what the database filters; at most
        // `scanBudget` devices are read for one page, as the local monitor scans at most that many.
        let scanBudget = 200_000
        var result: [DeviceSnapshot] = []
        var position: Int64? = Int64(cursor)
        var scanned = 0
        while let after = position, result.count < limit, scanned < scanBudget {
            let want = filter.filtersInfo ? max(limit, 500) : limit - result.count
            let page = try await read { try await store.devices(filter.query, after: after, limit: want) }
            scanned += page.records.count
            position = page.nextCursor
            for (record, at) in zip(page.records, page.positions) where filter.matches(record.info) {
                result.append(DeviceSnapshot(record: record, now: now, configuration: configuration.alerts))
                // Full: the next page resumes after this device, and reads the rest of this one again.
                if result.count == limit {
                    position = at == page.positions.last ? page.nextCursor : at
                    break
                }
            }
        }
        return DevicePage(devices: result, nextCursor: position.map { Int($0) })
    }

    /// The stored counter rows, updated in the same transaction as the devices.
    public func summary(_ scope: FleetScope) async throws(EngineError) -> FleetCounts {
        try queue.checkReadable()
        return try await read { try await store.counts(scope) }
    }

    public func summaries() async throws(EngineError) -> [FleetScope: FleetCounts] {
        try queue.checkReadable()
        return try await read { try await store.allCounts() }
    }

    public func alerts(_ query: AlertQuery) async throws(EngineError) -> AlertPage {
        try await readAlerts(query)
    }

    public func history(
        _ scope: FleetScope,
        resolution: HistoryResolution,
        from: Timestamp,
        to: Timestamp
    ) async throws(EngineError) -> [HistoryPoint] {
        try await readHistory(scope, resolution, from: from, to: to)
    }

    // MARK: The pipeline

    var syncStore: any SyncStore { store }

    var readyMetadata: Logger.Metadata { ["store.shared": "true"] }

    func prepare() async throws {
        try await store.prepare()
        try await webhooks.load()
    }

    func nextWake(now: Timestamp) async -> Timestamp? {
        let poll = now + configuration.sharedPollInterval
        let due = (try? await store.nextDeviceDeadline()) ?? nil
        let settle = policy.withLock { $0.nextSettleTime }
        return [poll, due, settle].compactMap { $0 }.min()
    }

    func step(now: Timestamp) async -> Bool {
        let jobs = queue.take(limit: configuration.maxGroupRequests)
        // Which lines settle now, without settling them yet: the group settles them once their devices are locked.
        let settling = policy.withLock { p in
            p.beginChanges()
            defer { p.discardChanges() }
            return p.settle(now: now)
        }
        var listed = Set<DeviceKey>()
        let keys = (jobs.map(\.batch.key) + settling.compactMap(\.key.deviceKey)).filter { listed.insert($0).inserted }

        let started = ContinuousClock.now
        let plan: GroupPlan
        do {
            // Subscriptions may have changed on another replica.
            try await webhooks.load()
            plan = try await store.transaction { tx in try await self.plan(jobs, locking: keys, now: now, in: tx) }
        } catch {
            policy.withLock { $0.discardChanges() }
            fail(jobs, error: error)
            return !jobs.isEmpty
        }
        let decided = policy.withLock { p in
            defer { p.keepChanges() }
            return p.hasChanges
        }
        if jobs.isEmpty && plan.changes.isEmpty && !decided { return false }
        finish(jobs, plan: plan, started: started)
        return true
    }

    /// One attempt at a group inside a transaction: lock, read, plan, write.
    private func plan(_ jobs: [IngestJob], locking keys: [DeviceKey], now: Timestamp, in tx: any SharedTransaction) async throws -> GroupPlan {
        // A retried attempt starts from the decisions before the first.
        policy.withLock { p in
            p.discardChanges()
            p.beginChanges()
        }
        let locked = try await tx.lockDevices(keys)
        let claimed = try await tx.claimDueDevices(now: now, limit: configuration.maxTimersPerGroup)
        let claims = jobs.map(\.claim)
        let seen = try await tx.seenEventIds(claims)
        var devices = DeviceTable()
        var due: [Int] = []
        let claimedKeys = Set(claimed.map(\.record.key))
        for stored in Array(locked.values) + claimed {
            let key = stored.record.key
            let i =
                devices.index[key]
                ?? devices.append(
                    stored.record,
                    contribution: stored.record.fleetContribution(now: stored.countedAt, configuration: configuration.alerts)
                )
            if claimedKeys.contains(key), !due.contains(i) { due.append(i) }
        }
        // Which containers' fleet alerts fire, for holding device alerts back; read again under lock below.
        let known = Set((0..<devices.count).compactMap { devices.records[$0].info.containerId } + jobs.compactMap(\.batch.info.containerId))
        let firing = FleetAlerts(firing: try await tx.fleetAlerts(known.sorted()))
        var plan = policy.withLock { p in
            // The counters start at zero: the plan's counters are the group's deltas.
            GroupPlan.make(
                batches: jobs.lazy.map(\.batch),
                seen: seen,
                due: due,
                devices: devices,
                counters: FleetCounters(),
                fleetAlerts: firing,
                policy: &p,
                now: now,
                configuration: configuration,
                subscribers: webhooks.subscribers(for:context:)
            )
        }
        plan.changes.eventIds = StoreChanges.newIds(claims, seen: seen)
        guard !plan.changes.isEmpty || !plan.transitions.isEmpty else { return plan }
        let counts = try await tx.addCounts(plan.counters, returning: plan.containers)
        plan.fleetAlerts = FleetAlerts(firing: try await tx.fleetAlerts(plan.containers))
        policy.withLock { p in
            plan.evaluateFleet(
                counts: { counts[$0] ?? FleetCounts() },
                policy: &p,
                now: now,
                configuration: configuration,
                subscribers: webhooks.subscribers(for:context:)
            )
        }
        try await tx.write(plan.changes)
        return plan
    }
}
