import SyncHealthCore
import SyncHealthStore

/// The pipeline over a `SharedSyncStore`, for several replicas on one database.
///
/// Nothing about devices is cached: each group locks its devices in the store, reads them, plans on them
/// with the same `Plan` as the single-process pipeline, and writes the result in the same transaction.
/// Timers are the store's due-time column, claimed with `SKIP LOCKED`, so a replica serves the timers of
/// one that died. Reads go to the store. Only the notification policy (flapping, fleet hold-back counts)
/// stays per replica.
extension MonitorEngine {
    func sharedLoop(_ store: any SharedSyncStore) async {
        var pruning = PruneSchedule(start: clock.now)
        while true {
            if phase.load(ordering: .acquiring) != Phase.ready.rawValue || Task.isCancelled { return }
            let now = clock.now
            let worked = await sharedStep(now: now, store: store)
            if await prune(&pruning, now: now) || worked { continue }
            let poll = now + configuration.sharedPollInterval
            let due = (try? await store.nextDeviceDeadline()) ?? nil
            let settle = cache.withLock { $0.policy.nextSettleTime }
            await wake.wait(until: [poll, due, settle].compactMap { $0 }.min(), clock: clock)
        }
    }

    /// Serves one group: queued requests, due timers and settling lines. Returns whether there was anything.
    func sharedStep(now: Timestamp, store: any SharedSyncStore) async -> Bool {
        let jobs = takeJobs()
        let policy = cache.withLock { $0.policy }
        var probe = policy
        let settleKeys = probe.settle(now: now).compactMap { OutboxBuilder.deviceKey(orderingKey: $0.key) }
        var listed = Set<DeviceKey>()
        let keys = (jobs.map(\.batch.key) + settleKeys).filter { listed.insert($0).inserted }

        let configuration = self.configuration
        let webhooks = self.webhooks
        let plan: Plan
        let decided: NotificationPolicy
        let started = ContinuousClock.now
        do {
            // Subscriptions may have changed on another replica.
            try await webhooks.load()
            (plan, decided) = try await store.transaction { tx in
                let locked = try await tx.lockDevices(keys)
                let claimed = try await tx.claimDueDevices(now: now, limit: configuration.maxTimersPerGroup)
                let claims = jobs.map { (key: $0.batch.key, eventIds: $0.batch.events.map(\.eventId)) }
                let seen = try await tx.seenEventIds(claims)
                var c = Cache()
                c.policy = policy
                var due: [Int] = []
                for stored in Array(locked.values) + claimed {
                    let i = c.index[stored.record.key] ?? c.append(stored.record, contribution:
                        stored.record.fleetContribution(now: stored.countedAt, configuration: configuration.alerts))
                    if claimed.contains(where: { $0.record.key == stored.record.key }), !due.contains(i) { due.append(i) }
                }
                // Which containers' fleet alerts fire, for holding device alerts back; re-read under lock below.
                let known = Set(c.records.compactMap(\.info.containerId) + jobs.compactMap(\.batch.info.containerId))
                c.fleetAlerts = FleetAlerts(firing: try await tx.fleetAlerts(known.sorted()))
                var plan = Plan.make(batches: jobs.lazy.map(\.batch), seen: seen, due: due, cache: &c, now: now, configuration: configuration,
                                     subscribers: webhooks.subscribers(of:))
                plan.changes.eventIds = StoreChanges.newIds(claims, seen: seen)
                guard !plan.changes.isEmpty || !plan.transitions.isEmpty else { return (plan, c.policy) }
                let counts = try await tx.addCounts(plan.counters, returning: plan.containers)
                plan.fleetAlerts = FleetAlerts(firing: try await tx.fleetAlerts(plan.containers))
                plan.evaluateFleet(counts: { counts[$0] ?? FleetCounts() }, policy: &c.policy, now: now, configuration: configuration,
                                   subscribers: webhooks.subscribers(of:))
                try await tx.write(plan.changes)
                return (plan, c.policy)
            }
        } catch {
            fail(jobs, due: [], now: now, error: error)
            return !jobs.isEmpty
        }
        if jobs.isEmpty && plan.changes.isEmpty && policy == decided { return false }
        metrics.commitDuration.recordNanoseconds(Int64((ContinuousClock.now - started).microseconds) * 1000)
        metrics.commits.increment()
        metrics.groupSize.record(jobs.count)
        cache.withLock { $0.policy = decided }
        finish(jobs, plan: plan)
        return true
    }
}
