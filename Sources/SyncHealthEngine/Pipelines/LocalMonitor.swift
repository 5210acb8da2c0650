import CoreMetrics
import HeapModule
public import Logging
public import SyncHealthCore
public import SyncHealthStore
import Synchronization

/// The monitor over a store that this process alone writes (SQLite, or memory in tests).
///
/// Every device is cached in memory, with its timers and the fleet counters; the cache is the authority between
/// commits and is rebuilt from the store at start. One serialized pipeline applies batches and timers in group
/// commits: record the event ids (learning which were seen before), plan the new states on copies, write them and
/// commit; only then install them in the cache and answer the requests. A failed commit changes nothing, and its
/// requests get `EngineError.storeUnavailable`. Under load the groups run in a series where the store commits,
/// one after another, without a trip back to this task between them (`LocalSyncStore`).
public final class LocalMonitor: MonitorEngine, GroupPipeline {
    let parts: EngineParts
    let store: any LocalSyncStore
    let cache = Mutex(LocalCache())

    /// Creates a monitor over `store`. Call `run()` (as a service) to load the state and serve.
    public init(
        store: any LocalSyncStore,
        clock: any ServiceClock,
        configuration: EngineConfiguration = EngineConfiguration(),
        delivery: Delivery,
        logger: Logger
    ) {
        self.store = store
        self.parts = EngineParts(clock: clock, configuration: configuration, delivery: delivery, logger: logger)
    }

    public func run() async throws { try await runPipeline() }

    public var isReady: Bool { queue.isReady }
    public var clock: any ServiceClock { parts.clock }
    public var configuration: EngineConfiguration { parts.configuration }
    public var feed: LiveFeed { parts.feed }

    /// The number of devices tracked.
    public var deviceCount: Int { cache.withLock { $0.devices.liveCount } }

    // MARK: Writes and reads

    public func ingest(_ batch: EventBatch) async throws(EngineError) -> IngestReceipt {
        try await queue.submit(batch)
    }

    public func device(_ key: DeviceKey) async throws(EngineError) -> DeviceSnapshot? {
        try queue.checkReadable()
        let now = clock.now
        return cache.withLock { c in
            c.devices.index[key].map { DeviceSnapshot(record: c.devices.records[$0], now: now, configuration: configuration.alerts) }
        }
    }

    public func records(_ keys: [DeviceKey]) async throws(EngineError) -> [DeviceKey: DeviceRecord] {
        try queue.checkReadable()
        return cache.withLock { c in
            var records: [DeviceKey: DeviceRecord] = [:]
            for key in keys { if let i = c.devices.index[key] { records[key] = c.devices.records[i] } }
            return records
        }
    }

    public func devices(withId deviceId: String) async throws(EngineError) -> [DeviceKey] {
        try queue.checkReadable()
        return cache.withLock { $0.devices.keys(deviceId: deviceId) }
    }

    public func devices(_ filter: DeviceFilter, after cursor: Int, limit: Int) async throws(EngineError) -> DevicePage {
        try queue.checkReadable()
        let now = clock.now
        // At most `scanBudget` devices are looked at per page, a chunk per hold of the cache lock: one hold over
        // the whole budget would stall every commit and read behind it. The cursor is an ordinal, which a
        // compaction between two holds does not change, so a page taken over several holds lists each device once.
        let scanBudget = 200_000
        let chunk = max(1, configuration.listScanChunk)
        var result: [DeviceSnapshot] = []
        var ordinal = Int64(max(0, cursor))
        var scanned = 0
        var done = false
        repeat {
            (ordinal, done, scanned) = cache.withLock { c in
                var i = c.devices.position(atOrAfter: ordinal)
                let end = min(c.devices.count, i + min(chunk, scanBudget - scanned))
                let first = i
                while i < end, result.count < limit {
                    if c.devices.present[i], filter.matches(c.devices.contributions[i]),
                        !filter.filtersInfo || filter.matches(c.devices.records[i].info)
                    {
                        result.append(DeviceSnapshot(record: c.devices.records[i], now: now, configuration: configuration.alerts))
                    }
                    i += 1
                }
                let atEnd = i >= c.devices.count
                return (atEnd ? c.devices.nextOrdinal : c.devices.ordinals[i], atEnd, scanned + (i - first))
            }
        } while !done && result.count < limit && scanned < scanBudget
        return DevicePage(devices: result, nextCursor: done ? nil : Int(ordinal))
    }

    public func summary(_ scope: FleetScope) async throws(EngineError) -> FleetCounts {
        try queue.checkReadable()
        return cache.withLock { $0.counters[scope] }
    }

    public func summaries() async throws(EngineError) -> [FleetScope: FleetCounts] {
        try queue.checkReadable()
        return cache.withLock { $0.counters.scopes }
    }

    public func releases(appId: String, by dimension: ReleaseDimension) async throws(EngineError) -> [String: ReleaseCounts] {
        try queue.checkReadable()
        return cache.withLock { $0.releases.releases(appId: appId, by: dimension) }
    }

    public func appVersions() async throws(EngineError) -> [String: [String: ReleaseCounts]] {
        try queue.checkReadable()
        return cache.withLock { c in
            Dictionary(uniqueKeysWithValues: c.releases.appIds.map { ($0, c.releases.releases(appId: $0, by: .appVersion)) })
        }
    }

    public func alerts(_ query: AlertQuery) async throws(EngineError) -> AlertPage {
        try await readAlerts(query)
    }

    public func erase(_ key: DeviceKey) async throws(EngineError) -> Bool {
        let existed = try await queue.submitErasure(key).existed
        try await read { try await store.removeSample(key) }
        return existed
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

    public var syncStore: any SyncStore { store }

    var publishesTransitions: Bool { true }

    var readyMetadata: Logger.Metadata { ["devices.count": "\(deviceCount)", "store.shared": "false"] }

    /// Rebuilds the cache from the store: devices, fleet counters, timers.
    func prepare() async throws {
        try await delivery.load()
        // Readers that reconnect after a restart resume from the transitions the store kept.
        feed.rebuild(recent: try await store.recentTransitions(limit: feed.replayCapacity))
        let state = try await store.loadState()
        let now = clock.now
        let alerts = configuration.alerts
        cache.withLock { c in
            c = LocalCache()
            c.policy = NotificationPolicy(configuration: configuration.notifications)
            c.devices.index.reserveCapacity(state.devices.count)
            for record in state.devices {
                let contribution = record.fleetContribution(now: now, configuration: alerts)
                let i = c.append(record, contribution: contribution)
                c.counters.replace(nil, with: contribution)
                c.releases.replace(nil, with: contribution, firstSeenAt: record.firstSeenAt, lastSeenAt: record.lastSeenAt)
                // Evaluate a copy: anything that came due while the server was down is served at once,
                // through the pipeline, so that its transitions are committed like any other.
                var probe = record
                let evaluation = probe.evaluateAlerts(now: now, configuration: alerts)
                c.setDeadline(evaluation.transitions.isEmpty ? configuration.deadline(evaluation.nextDeadline, for: record) : now, for: i)
                for (kind, _) in record.firingAlerts { c.firing[kind, default: 0] += 1 }
            }
            c.fleetAlerts = FleetAlerts(firing: state.fleetAlerts)
            c.firing[.fleetDegraded] = state.fleetAlerts.count
        }
        metrics.devices.record(state.devices.count)
        updateFiringGauges()
    }

    func nextWake(now: Timestamp) async -> Timestamp? {
        cache.withLock { c in [c.deadlines.min?.at, c.policy.nextSettleTime].compactMap { $0 }.min() }
    }

    /// Commits groups in a series on the store's commit thread while requests or timers wait (see
    /// `LocalSyncStore`), for at most `seriesLimit`, so that pruning and shutdown get their turn between series.
    func step(now: Timestamp) async -> Bool {
        // Nothing waits: the loop does not go to the commit thread only to find that out, as it would after
        // every series (a request that arrives meanwhile has signalled the loop's next wait).
        guard !queue.isEmpty || cache.withLock({ $0.hasDue(now: now) }) else { return false }
        do {
            return try await store.commitSeries { committer in self.series(committer, startingAt: now) }
        } catch {
            // The series could not start (a fold it needed failed): what waits fails, as its commit would have.
            let jobs = queue.take(limit: configuration.maxGroupRequests)
            let erasures = queue.takeErasures(limit: Self.maxErasuresPerGroup)
            let due = cache.withLock { c in
                let due = c.popDue(now: now, limit: configuration.maxTimersPerGroup)
                for i in due { c.setDeadline(now + .seconds(1), for: i) }
                return due
            }
            if !jobs.isEmpty || !erasures.isEmpty { fail(jobs, erasures: erasures, error: error) }
            return !jobs.isEmpty || !erasures.isEmpty || !due.isEmpty
        }
    }

    /// How long one series may run before the loop looks at pruning and shutdown.
    static let seriesLimit = Duration.milliseconds(20)
    /// Most erasures in one group.
    static let maxErasuresPerGroup = 64

    /// The groups of one series; returns whether there was anything to do.
    private func series(_ committer: any GroupCommitter, startingAt start: Timestamp) -> Bool {
        let until = ContinuousClock.now + Self.seriesLimit
        var now = start
        var worked = false
        while true {
            switch commitGroup(committer, now: now) {
            case .idle: return worked
            case .failed: return true
            case .committed: worked = true
            }
            if committer.wantsBreak || ContinuousClock.now >= until { return true }
            now = clock.now
        }
    }

    private enum GroupOutcome {
        case idle, committed, failed
    }

    /// One group: the queued requests and due timers, planned on the cache, committed, then installed and
    /// answered.
    private func commitGroup(_ committer: any GroupCommitter, now start: Timestamp) -> GroupOutcome {
        let jobs = queue.take(limit: configuration.maxGroupRequests)
        let erasures = queue.takeErasures(limit: Self.maxErasuresPerGroup)
        // The group's time is read once its requests are taken, so that none is older than a request it answers (a
        // silence made before a request arrived holds its alerts, and its alerts do not start before it).
        let now = max(start, clock.now)
        let (due, settling) = cache.withLock { c in
            (c.popDue(now: now, limit: configuration.maxTimersPerGroup), c.policy.nextSettleTime.map { $0 <= now } ?? false)
        }
        if jobs.isEmpty && erasures.isEmpty && due.isEmpty && !settling { return .idle }

        let started = ContinuousClock.now
        let plan: GroupPlan
        do {
            // Judge the group's event ids, plan on copies of the cache, append: nothing records an id in between.
            let seen = try committer.judge(jobs.map(\.claim))
            plan = self.plan(jobs, seen: seen, due: due, erasures: erasures.map(\.key), now: now)
            try committer.append(plan.changes, at: now)
        } catch {
            cache.withLock { c in
                c.policy.discardChanges()
                // The timers come back a second later.
                for i in due { c.setDeadline(now + .seconds(1), for: i) }
            }
            fail(jobs, erasures: erasures, error: error)
            return .failed
        }
        let deviceCount = cache.withLock { c in
            c.install(plan)
            return c.devices.liveCount
        }
        metrics.devices.record(deviceCount)
        if !plan.transitions.isEmpty { updateFiringGauges() }
        finish(jobs, plan: plan, started: started)
        finish(erasures, plan: plan, at: now)
        return .committed
    }

    /// Plans a group on the cache; only the notification policy is changed in place (kept by `install`, taken
    /// back on failure).
    private func plan(
        _ jobs: [IngestJob],
        seen: [Set<String>],
        due: [Int],
        erasures: [DeviceKey],
        now: Timestamp
    ) -> GroupPlan {
        // Taken before the cache's lock, so that planning nests no lock in it.
        let routing = delivery.routing(now: now)
        return cache.withLock { c in
            c.policy.beginChanges()
            var plan = GroupPlan.make(
                batches: jobs.lazy.map(\.batch),
                seen: seen,
                due: due,
                erasures: erasures,
                devices: c.devices,
                fleetAlerts: c.fleetAlerts,
                policy: &c.policy,
                now: now,
                configuration: configuration,
                subscribers: routing.subscribers(for:context:)
            )
            plan.evaluateFleet(
                before: { c.counters[FleetScope(containerId: $0)] },
                now: now,
                configuration: configuration,
                subscribers: routing.subscribers(for:context:)
            )
            return plan
        }
    }

    private func updateFiringGauges() {
        let firing = cache.withLock { $0.firing }
        for (kind, gauge) in metrics.firing { gauge.record(firing[kind] ?? 0) }
    }
}
