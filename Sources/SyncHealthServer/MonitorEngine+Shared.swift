import SyncHealthCore
import SyncHealthStore

/// The pipeline over a `SharedSyncStore`, for several replicas on one database.
///
/// Nothing about devices is cached: each group locks its devices in the store, reads them, plans on them
/// with the same `Plan` as the single-process pipeline, and writes the result in the same transaction.
/// Timers are the store's due-time column, claimed with `SKIP LOCKED`, so a replica serves the timers of
/// one that died. Reads go to the store. Only the notification policy (flapping, fleet hold-back counts)
/// stays per replica, in the cache: a group decides on it in place (moved into its plan's cache under the lock,
/// and back), keeps its changes after the commit, and takes them back when an attempt fails.
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
        // Which lines settle now, without settling them yet: the group settles them once their devices are locked.
        let settling = cache.withLock { c in
            c.policy.beginChanges()
            defer { c.policy.discardChanges() }
            return c.policy.settle(now: now)
        }
        let settleKeys = settling.compactMap { OutboxBuilder.deviceKey(orderingKey: $0.key) }
        var listed = Set<DeviceKey>()
        let keys = (jobs.map(\.batch.key) + settleKeys).filter { listed.insert($0).inserted }

        let configuration = self.configuration
        let webhooks = self.webhooks
        let plan: Plan
        let started = ContinuousClock.now
        do {
            // Subscriptions may have changed on another replica.
            try await webhooks.load()
            plan = try await store.transaction { tx in
                // A retried attempt starts from the decisions before the first.
                self.cache.withLock { c in
                    c.policy.discardChanges()
                    c.policy.beginChanges()
                }
                let locked = try await tx.lockDevices(keys)
                let claimed = try await tx.claimDueDevices(now: now, limit: configuration.maxTimersPerGroup)
                let claims = jobs.map { (key: $0.batch.key, eventIds: $0.batch.events.map(\.eventId)) }
                let seen = try await tx.seenEventIds(claims)
                var c = Cache()
                var due: [Int] = []
                for stored in Array(locked.values) + claimed {
                    let i = c.index[stored.record.key] ?? c.append(stored.record, contribution:
                        stored.record.fleetContribution(now: stored.countedAt, configuration: configuration.alerts))
                    if claimed.contains(where: { $0.record.key == stored.record.key }), !due.contains(i) { due.append(i) }
                }
                // Which containers' fleet alerts fire, for holding device alerts back; re-read under lock below.
                let known = Set(c.records.compactMap(\.info.containerId) + jobs.compactMap(\.batch.info.containerId))
                c.fleetAlerts = FleetAlerts(firing: try await tx.fleetAlerts(known.sorted()))
                var plan = self.cache.withLock { engine in
                    // Moved, not copied: a copy would duplicate every line of the last window on the first change.
                    swap(&c.policy, &engine.policy)
                    defer { swap(&c.policy, &engine.policy) }
                    return Plan.make(batches: jobs.lazy.map(\.batch), seen: seen, due: due, cache: &c, now: now, configuration: configuration,
                                     subscribers: webhooks.subscribers(of:))
                }
                plan.changes.eventIds = StoreChanges.newIds(claims, seen: seen)
                guard !plan.changes.isEmpty || !plan.transitions.isEmpty else { return plan }
                let counts = try await tx.addCounts(plan.counters, returning: plan.containers)
                plan.fleetAlerts = FleetAlerts(firing: try await tx.fleetAlerts(plan.containers))
                self.cache.withLock { engine in
                    plan.evaluateFleet(counts: { counts[$0] ?? FleetCounts() }, policy: &engine.policy, now: now, configuration: configuration,
                                       subscribers: webhooks.subscribers(of:))
                }
                try await tx.write(plan.changes)
                return plan
            }
        } catch {
            fail(jobs, due: [], now: now, error: error)
            return !jobs.isEmpty
        }
        let decided = cache.withLock { c in
            defer { c.policy.keepChanges() }
            return c.policy.hasChanges
        }
        if jobs.isEmpty && plan.changes.isEmpty && !decided { return false }
        metrics.commitDuration.recordNanoseconds(Int64((ContinuousClock.now - started).microseconds) * 1000)
        metrics.commits.increment()
        metrics.groupSize.record(jobs.count)
        finish(jobs, plan: plan)
        return true
    }
}
