import CoreMetrics
public import Logging
public import SyncHealthCore
public import SyncHealthStore
import Synchronization

/// The monitor over a store that several replicas share (PostgreSQL).
///
/// A group plans with the same `GroupPlan` as `LocalMonitor` and writes the result only if none of what it planned
/// on changed meanwhile (else it reads and plans again). It plans on a read of its devices, or, when the replica
/// knows them (`SharedCache`: as it last read or wrote them), on what it knows, and then the guarded write is the
/// group's only round trip. Timers are the store's due-time column, claimed for a lease, so a replica serves the timers of one
/// that died. Reads go to the store, so every replica answers alike as soon as a write commits; subscriptions and
/// fleet rules follow other replicas' writes within `sharedPollInterval`. Only the notification policy (flapping)
/// is per replica: a group decides on it in place, keeps its changes after the commit, and
/// takes them back when an attempt fails.
public final class SharedMonitor: MonitorEngine, GroupPipeline {
    let parts: EngineParts
    let store: any SharedSyncStore
    let policy: Mutex<NotificationPolicy>
    let passes = Mutex(SharedPasses())
    let cache: Mutex<SharedCache>
    /// The last count of every app's releases, for the metrics.
    let releaseCache = Mutex<(at: Timestamp, apps: [String: [String: ReleaseCounts]])?>(nil)

    /// Creates a monitor over `store`. Call `run()` (as a service) to prepare the store and serve.
    public init(
        store: any SharedSyncStore,
        clock: any ServiceClock,
        configuration: EngineConfiguration = EngineConfiguration(),
        delivery: Delivery,
        logger: Logger
    ) {
        self.store = store
        self.parts = EngineParts(clock: clock, configuration: configuration, delivery: delivery, logger: logger)
        self.policy = Mutex(NotificationPolicy(configuration: configuration.notifications))
        self.cache = Mutex(SharedCache(capacity: configuration.sharedCacheDevices))
    }

    public func run() async throws { try await runPipeline() }

    public var isReady: Bool { queue.isReady }
    public var clock: any ServiceClock { parts.clock }
    public var configuration: EngineConfiguration { parts.configuration }
    public var feed: LiveFeed { parts.feed }

    // MARK: Writes and reads

    public func ingest(_ batch: EventBatch) async throws(EngineError) -> IngestReceipt {
        try await queue.submit(batch)
    }

    public func device(_ key: DeviceKey) async throws(EngineError) -> DeviceSnapshot? {
        try queue.checkReadable()
        let now = clock.now
        return try await read { try await store.device(key) }.map { DeviceSnapshot(record: $0, now: now, configuration: configuration.alerts) }
    }

    public func records(_ keys: [DeviceKey]) async throws(EngineError) -> [DeviceKey: DeviceRecord] {
        try queue.checkReadable()
        return try await read { try await store.devices(keys) }
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

    /// Counted from the app's stored devices, a page at a time: a read proportional to the app's devices.
    public func releases(appId: String, by dimension: ReleaseDimension) async throws(EngineError) -> [String: ReleaseCounts] {
        try await countReleases(DeviceQuery(appId: appId)).releases(appId: appId, by: dimension)
    }

    /// Counted from every stored device, at most once a minute.
    public func appVersions() async throws(EngineError) -> [String: [String: ReleaseCounts]] {
        let now = clock.now
        if let kept = releaseCache.withLock({ $0 }), now < kept.at + .seconds(60) { return kept.apps }
        let counters = try await countReleases(DeviceQuery())
        let apps = Dictionary(uniqueKeysWithValues: counters.appIds.map { ($0, counters.releases(appId: $0, by: .appVersion)) })
        releaseCache.withLock { $0 = (now, apps) }
        return apps
    }

    private func countReleases(_ query: DeviceQuery) async throws(EngineError) -> ReleaseCounters {
        try queue.checkReadable()
        let now = clock.now
        var counters = ReleaseCounters()
        var position: Int64? = 0
        while let after = position {
            let page = try await read { try await store.devices(query, after: after, limit: 2_000) }
            for record in page.records {
                let contribution = record.fleetContribution(now: now, configuration: configuration.alerts)
                counters.replace(nil, with: contribution, firstSeenAt: record.firstSeenAt, lastSeenAt: record.lastSeenAt)
            }
            position = page.nextCursor
        }
        return counters
    }

    public func alerts(_ query: AlertQuery) async throws(EngineError) -> AlertPage {
        try await readAlerts(query)
    }

    /// The device's rows go in a group like any write; its event ids after it, outside the pipeline, since
    /// finding them reads the whole id table. Asked again, that delete runs again: a retried erasure finishes it.
    public func erase(_ key: DeviceKey) async throws(EngineError) -> Bool {
        let (existed, at) = try await queue.submitErasure(key)
        try await read { try await store.eraseEventIds(of: key, recordedThrough: at) }
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

    var publishesTransitions: Bool { false }

    var readyMetadata: Logger.Metadata { ["store.shared": "true"] }

    func prepare() async throws {
        try await store.prepare()
        try await delivery.load()
    }

    func nextWake(now: Timestamp) async -> Timestamp? {
        let poll = now + configuration.sharedPollInterval
        let due: Timestamp?
        do {
            due = try await store.nextDeviceDeadline()
            passes.withLock { $0.timersIdleUntil = due ?? poll }
        } catch {
            due = nil
        }
        let settle = policy.withLock { $0.nextSettleTime }
        return [poll, due, settle].compactMap { $0 }.min()
    }

    func step(now woke: Timestamp) async -> Bool {
        await keepInTouch(now: woke)
        let jobs = queue.take(limit: configuration.maxGroupRequests)
        let erasures = queue.takeErasures(limit: LocalMonitor.maxErasuresPerGroup)
        // The group's time is read once its requests are taken, so that none is older than a request it answers (a
        // silence made before a request arrived holds its alerts, and its alerts do not start before it).
        let now = max(woke, clock.now)
        // Which lines settle now, without settling them yet: the group settles them once their devices are read.
        let settling = policy.withLock { p in
            p.beginChanges()
            defer { p.discardChanges() }
            return p.settle(now: now)
        }
        var listed = Set<DeviceKey>()
        let keys = (jobs.map(\.batch.key) + settling.compactMap(\.key.deviceKey) + erasures.map(\.key)).filter { listed.insert($0).inserted }
        let (everyContainer, timersIdle) = passes.withLock { p in
            (p.fleetPassDue(now: now, interval: configuration.sharedPollInterval), p.timersIdleUntil.map { now < $0 } ?? false)
        }
        // Nothing queued, nothing to settle or evaluate, no timer due: no round trip.
        if keys.isEmpty && !everyContainer && timersIdle { return false }

        let started = ContinuousClock.now
        let plan: GroupPlan
        do {
            plan = try await store.group { group in
                try await self.plan(
                    jobs,
                    erasures: erasures.map(\.key),
                    keys: keys,
                    mayWriteFirst: !everyContainer && timersIdle && erasures.isEmpty,
                    everyContainer: everyContainer,
                    now: now,
                    in: group
                )
            }
        } catch {
            policy.withLock { $0.discardChanges() }
            fail(jobs, erasures: erasures, error: error)
            return !jobs.isEmpty || !erasures.isEmpty
        }
        let decided = policy.withLock { p in
            defer { p.keepChanges() }
            return p.hasChanges
        }
        if let soonest = plan.changes.deadlines.values.min() {
            passes.withLock { p in p.timersIdleUntil = p.timersIdleUntil.map { min($0, soonest) } }
        }
        finish(erasures, plan: plan, at: now)
        if jobs.isEmpty && erasures.isEmpty && plan.changes.isEmpty && !decided { return false }
        finish(jobs, plan: plan, started: started)
        return true
    }

    /// Subscriptions made on another replica, and this replica's heartbeat, at most once a poll interval.
    private func keepInTouch(now: Timestamp) async {
        let (reload, beat) = passes.withLock { ($0.reloadDue(now: now, interval: configuration.sharedPollInterval), $0.heartbeatDue(now: now)) }
        if reload {
            do { try await delivery.load() } catch { logger.error("Reading webhook subscriptions failed", metadata: ["error": "\(error)"]) }
        }
        if beat {
            do {
                try await store.heartbeat(now: now, deadBefore: now - SharedPasses.replicaPresumedDead)
            } catch {
                logger.error("Replica heartbeat failed", metadata: ["error": "\(error)"])
            }
        }
    }

    /// A group in one read and one write, or in the write alone when `mayWriteFirst` and the cache knows enough;
    /// read and planned again when the write is refused (`SharedGroupStateMachine` decides which).
    private func plan(
        _ jobs: [IngestJob],
        erasures: [DeviceKey],
        keys: [DeviceKey],
        mayWriteFirst: Bool,
        everyContainer: Bool,
        now: Timestamp,
        in group: any SharedGroup
    ) async throws -> GroupPlan {
        let claims = jobs.map(\.claim)
        var machine = SharedGroupStateMachine(
            keys: keys,
            claims: claims,
            containers: Array(Set(jobs.compactMap(\.batch.info.containerId))),
            mayWriteFirst: mayWriteFirst,
            everyContainer: everyContainer,
            now: now,
            dueLimit: configuration.maxTimersPerGroup
        )
        var action = machine.start(cached: mayWriteFirst ? cache.withLock { $0.snapshot(keys: keys, claims: claims) } : nil)
        while true {
            switch action {
            case .read(let request):
                let missing = cache.withLock { c in request.keys.filter { c.devices[$0] == nil } }
                let snapshot = try await group.read(request)
                cache.withLock { $0.learn(snapshot, keys: request.keys, missing: missing) }
                if snapshot.due.count < configuration.maxTimersPerGroup {
                    // Every due timer is claimed: the next read for timers is a poll interval away, or at this
                    // replica's own next deadline (lowered as it writes them).
                    passes.withLock { $0.timersIdleUntil = now + configuration.sharedPollInterval }
                }
                // Subscriptions another replica changed since the last group: their alerts go to them from this group on.
                if let digest = snapshot.subscriptionsDigest, passes.withLock({ $0.subscriptionsDigest != digest }) {
                    delivery.webhooks.replaceSubscriptions(try await group.webhooks())
                    passes.withLock { $0.subscriptionsDigest = digest }
                }
                action = machine.read(snapshot)
            case .plan(let snapshot, let due):
                // Taken before the policy's lock, so that planning nests no lock in it.
                let routing = delivery.routing(now: now)
                var plan = self.plan(jobs, erasures: erasures, claims: claims, on: snapshot, due: due, now: now, routing: routing)
                let countsKnown = !machine.writingFirst || cache.withLock { $0.knowsCounts(of: plan.containers) }
                if countsKnown { evaluateFleet(&plan, on: snapshot, everyContainer: everyContainer, now: now, routing: routing) }
                action = machine.planned(plan, countsKnown: countsKnown)
            case .write(let write, let first):
                let written = try await group.write(write)
                cache.withLock { c in
                    if first { c.wroteFirst(refused: !written) }
                    if written { c.wrote(write) }
                }
                if written && first { metrics.writesFirst.increment() }
                if !written { metrics.writeConflicts.increment() }
                action = machine.wrote(written)
            case .finished(let plan):
                return plan
            case .giveUp:
                throw StoreError.unavailable(path: "shared store", reason: "a group lost \(machine.maxAttempts) write conflicts in a row")
            }
        }
    }

    /// The group planned on `snapshot`, from the notification policy's decisions before this attempt.
    private func plan(
        _ jobs: [IngestJob],
        erasures: [DeviceKey],
        claims: [EventIdClaim],
        on snapshot: GroupSnapshot,
        due dueKeys: [DeviceKey],
        now: Timestamp,
        routing: Routing
    ) -> GroupPlan {
        var devices = DeviceTable()
        for stored in snapshot.devices + snapshot.due where devices.index[stored.record.key] == nil {
            _ = devices.append(
                stored.record,
                contribution: stored.record.fleetContribution(now: stored.countedAt, configuration: configuration.alerts)
            )
        }
        let due = dueKeys.compactMap { devices.index[$0] }.sorted()
        var plan = policy.withLock { p in
            // An attempt starts from the decisions before the first.
            p.discardChanges()
            p.beginChanges()
            return GroupPlan.make(
                batches: jobs.lazy.map(\.batch),
                seen: snapshot.seen,
                due: due,
                erasures: erasures,
                devices: devices,
                fleetAlerts: FleetAlerts(firing: snapshot.fleetAlerts),
                policy: &p,
                now: now,
                configuration: configuration,
                subscribers: routing.subscribers(for:context:)
            )
        }
        // An erased device's ids of this group are not kept; those from before go after the group (`erase`).
        let erased = Set(plan.changes.removals.filter { $0.reason == .erased }.map(\.key))
        plan.changes.eventIds = StoreChanges.newIds(claims, seen: snapshot.seen).filter { !erased.contains($0.key) }
        return plan
    }

    /// The fleet rule of the plan's containers (every container with counts or a fleet alert, on a fleet pass), on
    /// the counts read plus the group's own deltas.
    private func evaluateFleet(_ plan: inout GroupPlan, on snapshot: GroupSnapshot, everyContainer: Bool, now: Timestamp, routing: Routing) {
        if everyContainer {
            plan.containers = Array(Set(plan.containers).union(snapshot.counts.keys).union(snapshot.fleetAlerts.keys)).sorted()
        }
        plan.evaluateFleet(
            before: { snapshot.counts[$0] ?? FleetCounts() },
            now: now,
            configuration: configuration,
            subscribers: routing.subscribers(for:context:)
        )
    }
}

/// When the shared pipeline last did its periodic work.
struct SharedPasses {
    /// A replica that has not beaten for this long is presumed dead; its counter shard is folded.
    static let replicaPresumedDead: Duration = .seconds(600)
    static let heartbeatInterval: Duration = .seconds(30)
    /// Attempts of one group before its requests are answered with an error.
    static let maxAttempts = 8

    /// No device's timer is due before this (as last read, and lowered by this replica's own writes); `nil`:
    /// unknown. Another replica's earlier deadline is seen at the next poll.
    var timersIdleUntil: Timestamp?
    /// The subscriptions' digest when they were last loaded.
    var subscriptionsDigest: String?
    var lastReload: Timestamp?
    var lastHeartbeat: Timestamp?
    var lastFleetPass: Timestamp?

    mutating func reloadDue(now: Timestamp, interval: Duration) -> Bool { Self.due(&lastReload, now: now, interval: interval) }
    mutating func heartbeatDue(now: Timestamp) -> Bool { Self.due(&lastHeartbeat, now: now, interval: Self.heartbeatInterval) }
    /// Every container's fleet rule is evaluated once a poll interval: a group sees the counts other replicas
    /// committed before its read, so a threshold that two replicas crossed together is caught by the next pass.
    mutating func fleetPassDue(now: Timestamp, interval: Duration) -> Bool { Self.due(&lastFleetPass, now: now, interval: interval) }

    private static func due(_ last: inout Timestamp?, now: Timestamp, interval: Duration) -> Bool {
        if let last, now < last + interval { return false }
        last = now
        return true
    }
}
