import Logging
import ServiceLifecycle
import SyncHealthCore
import SyncHealthStore

extension MonitorEngine {
    /// Loads the state from the store, then runs the pipeline until graceful shutdown or cancellation.
    /// Requests already queued at shutdown are committed before it returns; then the store is closed.
    public func run() async throws {
        do {
            // A shutdown while the store is still unreachable (a database that does not answer) ends the wait.
            try await cancelWhenGracefulShutdown {
                if let shared = self.shared {
                    try await shared.prepare()
                    try await self.webhooks.load()
                    self.cache.withLock { $0.policy = NotificationPolicy(configuration: self.configuration.notifications) }
                } else {
                    try await self.load()
                }
            }
        } catch {
            if Task.isShuttingDownGracefully || Task.isCancelled {
                phase.store(Phase.stopped.rawValue, ordering: .releasing)
                try? await store.close()
                logger.info("Monitor engine stopped before it was ready")
                return
            }
            // postgres-nio hides the server's message from the plain description; the reflection has it.
            logger.error("Monitor engine could not load the store", metadata: ["error": "\(String(reflecting: error))"])
            throw error
        }
        phase.store(Phase.ready.rawValue, ordering: .releasing)
        logger.info("Monitor engine ready", metadata: ["devices.count": "\(cache.withLock { $0.records.count })", "store.shared": "\(shared != nil)"])
        await withGracefulShutdownHandler {
            if let shared = self.shared { await self.sharedLoop(shared) } else { await self.loop() }
        } onGracefulShutdown: {
            self.phase.store(Phase.stopping.rawValue, ordering: .releasing)
            self.wake.signal()
        }
        // Serve whatever was accepted before the shutdown began.
        if let shared {
            while await sharedStep(now: clock.now, store: shared) {}
        } else {
            while await step(now: clock.now) {}
        }
        phase.store(Phase.stopped.rawValue, ordering: .releasing)
        try await store.close()
        logger.info("Monitor engine stopped")
    }

    /// Rebuilds the cache from the store: devices, fleet counters, timers.
    func load() async throws {
        try await webhooks.load()
        let state = try await store.loadState()
        let now = clock.now
        let alerts = configuration.alerts
        cache.withLock { c in
            c = Cache()
            c.policy = NotificationPolicy(configuration: configuration.notifications)
            c.index.reserveCapacity(state.devices.count)
            for record in state.devices {
                let contribution = record.fleetContribution(now: now, configuration: alerts)
                let i = c.append(record, contribution: contribution)
                c.counters.replace(nil, with: contribution)
                // Evaluate a copy: anything that came due while the server was down is served at once,
                // through the pipeline, so that its transitions are committed like any other.
                var probe = record
                let evaluation = probe.evaluateAlerts(now: now, configuration: alerts)
                c.setDeadline(evaluation.transitions.isEmpty ? evaluation.nextDeadline : now, for: i)
                for (kind, _) in record.firingAlerts { c.firing[kind, default: 0] += 1 }
            }
            c.fleetAlerts = FleetAlerts(firing: state.fleetAlerts)
            c.firing[.fleetDegraded] = state.fleetAlerts.count
        }
        metrics.devices.record(state.devices.count)
        updateFiringGauges()
    }

    func loop() async {
        var pruning = PruneSchedule(start: clock.now)
        while true {
            let current = phase.load(ordering: .acquiring)
            if current != Phase.ready.rawValue { return }
            if Task.isCancelled { return }
            let now = clock.now
            let worked = await step(now: now)
            if await prune(&pruning, now: now) || worked { continue }
            let next = cache.withLock { c -> Timestamp? in
                [c.deadlines.min?.at, c.policy.nextSettleTime].compactMap { $0 }.min()
            }
            await wake.wait(until: next, clock: clock)
        }
    }

    /// Forgets one batch of event ids older than the dedupe retention window when a pass is under way (one
    /// starts every hour), so that a pass runs between groups. Returns whether more batches are waiting.
    func prune(_ schedule: inout PruneSchedule, now: Timestamp) async -> Bool {
        guard let cutoff = schedule.cutoff(now: now, retention: configuration.dedupeRetention) else { return false }
        do {
            let removed = try await store.pruneEventIds(recordedBefore: cutoff, limit: configuration.pruneBatchSize)
            schedule.removed(removed, limit: configuration.pruneBatchSize)
            if !schedule.passUnderWay { logger.debug("Pruned event ids", metadata: ["events.pruned": "\(schedule.lastPassRemoved)"]) }
        } catch {
            schedule.abandonPass()
            logger.error("Pruning event ids failed", metadata: ["error": "\(error)"])
        }
        return schedule.passUnderWay
    }

    /// Serves one group: queued requests and due timers. Returns whether there was anything to do.
    func step(now: Timestamp) async -> Bool {
        let jobs = takeJobs()
        let (due, settling) = cache.withLock { c in
            (c.popDue(now: now, limit: configuration.maxTimersPerGroup), c.policy.nextSettleTime.map { $0 <= now } ?? false)
        }
        if jobs.isEmpty && due.isEmpty && !settling { return false }

        let claims = jobs.map { (key: $0.batch.key, eventIds: $0.batch.events.map(\.eventId)) }
        let started = ContinuousClock.now
        var plan: Plan
        do {
            // Dedupe, plan and write in one store transaction; the plan is computed on copies of the cache.
            plan = try await store.commit(claiming: claims, at: now) { seen in self.plan(jobs, seen: seen, due: due, now: now) }
        } catch {
            fail(jobs, due: due, now: now, error: error)
            return true
        }
        metrics.commitDuration.recordNanoseconds(Int64((ContinuousClock.now - started).microseconds) * 1000)
        metrics.commits.increment()
        metrics.groupSize.record(jobs.count)
        let deviceCount = cache.withLock { c in
            plan.install(into: &c)
            return c.records.count
        }
        metrics.devices.record(deviceCount)
        finish(jobs, plan: plan)
        return true
    }

    /// The new states of a group, on copies of the cache: requests (given which of their ids were seen before),
    /// due timers and the fleet rule.
    ///
    /// The notification policy is the one part changed in place (copying it costs in proportion to the alerts of the
    /// last hour): its changes are kept when the plan is installed, and taken back by `fail`.
    func plan(_ jobs: [IngestJob], seen: [Set<String>], due: [Int], now: Timestamp) -> (changes: StoreChanges, result: Plan) {
        cache.withLock { c in
            c.policy.beginChanges()
            var plan = Plan.make(batches: jobs.lazy.map(\.batch), seen: seen, due: due, cache: &c, now: now, configuration: configuration,
                                 subscribers: webhooks.subscribers(of:))
            let counters = plan.counters
            plan.evaluateFleet(counts: { counters[FleetScope(containerId: $0)] }, policy: &c.policy, now: now, configuration: configuration,
                               subscribers: webhooks.subscribers(of:))
            return (plan.changes, plan)
        }
    }

    /// Up to `maxGroupRequests` queued requests, oldest first.
    func takeJobs() -> [IngestJob] {
        queue.withLock { q -> [IngestJob] in
            let n = min(q.jobs.count, configuration.maxGroupRequests)
            let taken = Array(q.jobs.prefix(n))
            q.jobs.removeFirst(n)
            return taken
        }
    }

    /// After a commit: metrics and logs of the transitions, a nudge to the webhook sender, and the answers.
    func finish(_ jobs: [IngestJob], plan: Plan) {
        for transition in plan.transitions {
            guard let counters = metrics.transitions[transition.kind] else { continue }
            (transition.change == .fire ? counters.fire : counters.resolve).increment()
            logger.info(transition.change == .fire ? "Alert fired" : "Alert resolved",
                        metadata: ["alert.kind": "\(transition.kind.rawValue)", "alert.id": "\(transition.id)"])
        }
        if !plan.transitions.isEmpty && shared == nil { updateFiringGauges() }
        if !plan.changes.outbox.isEmpty { webhooks.notify() }
        for (job, receipt) in zip(jobs, plan.receipts) {
            metrics.eventsAccepted.increment(by: receipt.accepted)
            metrics.eventsDuplicate.increment(by: receipt.duplicates)
            metrics.eventsRejected.increment(by: job.batch.rejected.count)
            job.continuation.resume(returning: .success(receipt))
        }
    }

    /// Answers every request of a failed group and puts its timers back, a second later.
    func fail(_ jobs: [IngestJob], due: [Int], now: Timestamp, error: any Error) {
        metrics.commitFailures.increment()
        logger.error("Store commit failed; the group was not applied", metadata: ["error": "\(error)", "group.requests": "\(jobs.count)"])
        cache.withLock { c in
            c.policy.discardChanges()
            for i in due { c.setDeadline(now + .seconds(1), for: i) }
        }
        for job in jobs { job.continuation.resume(returning: .failure(.storeUnavailable)) }
    }

    func updateFiringGauges() {
        let firing = cache.withLock { $0.firing }
        for kind in AlertKind.allCases { metrics.firing[kind]?.record(firing[kind] ?? 0) }
    }
}

/// The new states of one group, computed on copies; installed in the cache only after the commit.
struct Plan {
    /// What to write. Its `eventIds` stay empty: a store records the claimed ids itself
    /// (`SyncStore.commit(claiming:at:plan:)`), and the shared path sets them from `StoreChanges.newIds`.
    var changes: StoreChanges
    var receipts: [IngestReceipt] = []
    /// Touched devices: cache index (or `nil` for new ones) and new record, in first-touch order.
    var touched: [(index: Int?, record: DeviceRecord, contribution: FleetContribution, deadline: Timestamp?)] = []
    var counters: FleetCounters
    var fleetAlerts: FleetAlerts
    var transitions: [(id: String, kind: AlertKind, change: AlertTransition.Change)] = []
    /// Containers a touched device left or joined, sorted: the fleet rule is evaluated for these.
    var containers: [String] = []

    /// Decides on `c.policy` in place; everything else in `c` is only read.
    static func make(batches: some Collection<EventBatch>, seen: [Set<String>], due: [Int], cache c: inout Cache, now: Timestamp, configuration: EngineConfiguration,
                     subscribers: (AlertKind) -> [WebhookSubscription]) -> Plan {
        var plan = Plan(changes: StoreChanges(recordedAt: now), counters: c.counters, fleetAlerts: c.fleetAlerts)
        var slot: [DeviceKey: Int] = [:]
        // A device with several requests in the group: the ids its earlier requests brought are duplicates in the
        // later ones. Kept only for such devices; most have one request.
        var requestsOf: [DeviceKey: Int] = [:]
        for batch in batches { requestsOf[batch.key, default: 0] += 1 }
        var seenInGroup: [DeviceKey: Set<String>] = [:]
        var gathered: [DeviceKey: (events: [DeviceEvent], requests: Int)] = [:]
        let alerts = configuration.alerts

        func touch(_ key: DeviceKey, make: () -> DeviceRecord) -> Int {
            if let s = slot[key] { return s }
            let index = c.index[key]
            let record = index.map { c.records[$0] } ?? make()
            let contribution = index.map { c.contributions[$0] } ?? record.fleetContribution(now: now, configuration: alerts)
            // A device touched only to settle a line keeps its timers: start from what they are now.
            var probe = record
            let evaluation = probe.evaluateAlerts(now: now, configuration: alerts)
            plan.touched.append((index, record, contribution, evaluation.transitions.isEmpty ? evaluation.nextDeadline : now))
            slot[key] = plan.touched.count - 1
            return plan.touched.count - 1
        }

        func record(_ transitions: [AlertTransition], of device: DeviceRecord) {
            for transition in transitions {
                let alert = AlertText.record(for: transition, device: device)
                plan.changes.alerts.append(alert)
                plan.transitions.append((alert.id, alert.kind, transition.change))
                let line = OutboxBuilder.orderingKey(device.key, alert.kind)
                let fleetFiring = device.info.containerId.map { plan.fleetAlerts.firing[$0] != nil } ?? false
                switch c.policy.decide(key: line, containerId: device.info.containerId, transition: transition, fleetFiring: fleetFiring, now: now) {
                case .deliver(let flapping):
                    var told = alert
                    if flapping {
                        let window = Int(configuration.notifications.flapWindow.secondsValue / 60)
                        told.detail += " Flapping: this alert fired more than \(configuration.notifications.flapThreshold) times in \(window) min;"
                            + " further changes are not delivered until it has been stable for \(window) min."
                    }
                    plan.changes.outbox += OutboxBuilder.messages(for: told, change: transition.change, orderingKey: line,
                                                                  subscribers: subscribers(alert.kind), now: now)
                case .suppressFlapping, .holdForFleet:
                    break
                }
            }
        }

        for (batch, seenIds) in zip(batches, seen) {
            let key = batch.key
            let s = touch(key) { DeviceRecord(key: key, info: batch.info, firstSeenAt: now) }
            let (fresh, duplicates): ([DeviceEvent], Int)
            if requestsOf[key, default: 0] > 1 {
                var inGroup = seenInGroup[key] ?? []
                (fresh, duplicates) = batch.events.removingDuplicates { seenIds.contains($0) || inGroup.contains($0) }
                for event in fresh { inGroup.insert(event.eventId) }
                seenInGroup[key] = inGroup
            } else {
                (fresh, duplicates) = batch.events.removingDuplicates { seenIds.contains($0) }
            }
            plan.receipts.append(IngestReceipt(accepted: fresh.count, duplicates: duplicates))
            // A device's requests in one group are applied together, at its last one, and evaluated once: every
            // transition of the group happens at `now`, so a fire, resolve and fire again would be one incident id.
            var events = fresh
            if let requests = requestsOf[key], requests > 1 {
                let earlier = gathered[key, default: (events: [], requests: 0)]
                guard earlier.requests + 1 == requests else {
                    gathered[key] = (earlier.events + fresh, earlier.requests + 1)
                    continue
                }
                events = earlier.events + fresh
            }
            var device = plan.touched[s].record
            let result = device.ingest(events, info: batch.info, now: now, skew: configuration.skew, configuration: alerts)
            record(result.transitions, of: device)
            plan.touched[s].record = device
            plan.touched[s].deadline = result.nextDeadline
        }

        for i in due {
            let s = touch(c.records[i].key) { c.records[i] }
            var device = plan.touched[s].record
            let evaluation = device.evaluateAlerts(now: now, configuration: alerts)
            record(evaluation.transitions, of: device)
            plan.touched[s].record = device
            plan.touched[s].deadline = evaluation.nextDeadline
        }

        // Flapping alerts that have been quiet for a window: tell ops the state they have not heard.
        for (line, transition) in c.policy.settle(now: now) {
            guard let key = OutboxBuilder.deviceKey(orderingKey: line), let i = c.index[key] else { continue }
            let s = touch(key) { c.records[i] }
            let alert = AlertText.record(for: transition, device: plan.touched[s].record)
            plan.changes.outbox += OutboxBuilder.messages(for: alert, change: transition.change, orderingKey: line,
                                                          subscribers: subscribers(alert.kind), now: now)
        }

        // Fleet counters, for every container a touched device left or joined; the fleet rule comes after.
        var containers = Set<String>()
        for s in plan.touched.indices {
            let old = plan.touched[s].index.map { _ in plan.touched[s].contribution }
            let new = plan.touched[s].record.fleetContribution(now: now, configuration: alerts)
            plan.counters.replace(old, with: new)
            if let c = old?.containerId { containers.insert(c) }
            if let c = new.containerId { containers.insert(c) }
            plan.touched[s].contribution = new
        }
        plan.containers = containers.sorted()
        plan.changes.devices = plan.touched.map(\.record)
        for item in plan.touched {
            if let deadline = item.deadline { plan.changes.deadlines[item.record.key] = deadline }
        }
        return plan
    }

    /// Evaluates the fleet rule of every container the group touched, given their counts after the group.
    mutating func evaluateFleet(counts countsOf: (String) -> FleetCounts, policy: inout NotificationPolicy, now: Timestamp,
                                configuration: EngineConfiguration, subscribers: (AlertKind) -> [WebhookSubscription]) {
        for container in containers {
            let counts = countsOf(container)
            guard let transition = fleetAlerts.evaluate(containerId: container, counts: counts, now: now, configuration: configuration.alerts) else { continue }
            var alert = AlertText.record(for: transition, containerId: container, counts: counts)
            if transition.change == .resolve {
                let held = policy.takeHeldBack(containerId: container)
                if held > 0 {
                    alert.detail += " \(held) device alert changes of this container were held back while it fired; GET /v1/alerts lists them."
                }
            }
            changes.alerts.append(alert)
            changes.fleetAlerts.append((container, transition.change == .fire ? transition.startsAt : nil))
            transitions.append((alert.id, .fleetDegraded, transition.change))
            changes.outbox += OutboxBuilder.messages(for: alert, change: transition.change, orderingKey: "c\u{1}\(container)",
                                                     subscribers: subscribers(.fleetDegraded), now: now)
        }
    }

    /// Installs the committed states in the cache.
    mutating func install(into c: inout Cache) {
        for item in touched {
            let i: Int
            if let index = item.index {
                i = index
                c.records[i] = item.record
                c.contributions[i] = item.contribution
            } else {
                i = c.append(item.record, contribution: item.contribution)
            }
            c.setDeadline(item.deadline, for: i)
        }
        c.compactDeadlinesIfNeeded()
        c.counters = counters
        c.fleetAlerts = fleetAlerts
        c.policy.keepChanges()
        for t in transitions { c.firing[t.kind, default: 0] += t.change == .fire ? 1 : -1 }
    }
}
