import CoreMetrics
import Logging
import ServiceLifecycle
import SyncHealthCore
import SyncHealthStore

/// What the two pipelines do differently; `run()`'s lifecycle, pruning and reporting are the same for both.
protocol GroupPipeline: MonitorEngine, AnyObject {
    /// What both are made of.
    var parts: EngineParts { get }
    /// The store, for what both pipelines do alike (pruning, alerts, closing).
    var syncStore: any SyncStore { get }
    /// Whether the pipeline publishes its commits' transitions to the live feed itself; a shared store's reach it
    /// from the store (`TransitionFollower`), with every other replica's, in one order.
    var publishesTransitions: Bool { get }

    /// Readies the store and the state before the first group.
    func prepare() async throws
    /// Serves one group: queued requests and due timers. Returns whether there was anything to do.
    func step(now: Timestamp) async -> Bool
    /// When the loop must look again even if no request arrives.
    func nextWake(now: Timestamp) async -> Timestamp?
    /// Metadata for the ready log line.
    var readyMetadata: Logger.Metadata { get }
}

extension GroupPipeline {
    var delivery: Delivery { parts.delivery }
    var queue: IngestQueue { parts.queue }
    var logger: Logger { parts.logger }
    var metrics: EngineMetrics { parts.metrics }

    /// Prepares, then serves groups until graceful shutdown or cancellation. Requests already queued at shutdown
    /// are committed before it returns; then the store is closed.
    func runPipeline() async throws {
        do {
            // A shutdown while the store is still unreachable (a database that does not answer) ends the wait.
            try await cancelWhenGracefulShutdown { try await self.prepare() }
        } catch {
            if Task.isShuttingDownGracefully || Task.isCancelled {
                queue.set(.stopped)
                try? await syncStore.close()
                logger.info("Monitor engine stopped before it was ready")
                return
            }
            // postgres-nio hides the server's message from the plain description; the reflection has it.
            logger.error("Monitor engine could not load the store", metadata: ["error": "\(String(reflecting: error))"])
            throw error
        }
        queue.set(.ready)
        logger.info("Monitor engine ready", metadata: readyMetadata)
        await withGracefulShutdownHandler {
            await self.loop()
        } onGracefulShutdown: {
            self.queue.set(.stopping)
            self.queue.wake.signal()
        }
        // Serve whatever was accepted before the shutdown began.
        while await step(now: clock.now) {}
        queue.set(.stopped)
        try await syncStore.close()
        logger.info("Monitor engine stopped")
    }

    private func loop() async {
        var pruning = PruneSchedule(start: clock.now)
        var historyPruning = PruneSchedule(start: clock.now)
        while queue.phase == .ready, !Task.isCancelled {
            let now = clock.now
            let worked = await step(now: now)
            // Both prunes get their batch whether or not the group worked: under a steady load every group does.
            let idsLeft = await prune(&pruning, now: now)
            let historyLeft = await pruneHistory(&historyPruning, now: now)
            if worked || idsLeft || historyLeft { continue }
            await queue.wake.wait(until: await nextWake(now: now), clock: clock)
        }
    }

    /// Forgets one batch of history older than `alertRetention` when a pass is under way (one starts every hour),
    /// as `prune` does for event ids. Returns whether more batches are waiting.
    private func pruneHistory(_ schedule: inout PruneSchedule, now: Timestamp) async -> Bool {
        guard let retention = configuration.alertRetention, let cutoff = schedule.cutoff(now: now, retention: retention) else { return false }
        do {
            let removed = try await syncStore.pruneHistory(before: cutoff, limit: configuration.pruneBatchSize)
            schedule.removed(removed, limit: configuration.pruneBatchSize)
            if !schedule.passUnderWay { logger.debug("Pruned alert history", metadata: ["history.pruned": "\(schedule.lastPassRemoved)"]) }
        } catch {
            schedule.abandonPass()
            logger.error("Pruning alert history failed", metadata: ["error": "\(error)"])
        }
        return schedule.passUnderWay
    }

    /// Forgets one batch of event ids older than the dedupe retention window when a pass is under way (one
    /// starts every hour), so that a pass runs between groups. Returns whether more batches are waiting.
    private func prune(_ schedule: inout PruneSchedule, now: Timestamp) async -> Bool {
        guard let cutoff = schedule.cutoff(now: now, retention: configuration.dedupeRetention) else { return false }
        do {
            let removed = try await syncStore.pruneEventIds(recordedBefore: cutoff, limit: configuration.pruneBatchSize)
            schedule.removed(removed, limit: configuration.pruneBatchSize)
            if !schedule.passUnderWay { logger.debug("Pruned event ids", metadata: ["events.pruned": "\(schedule.lastPassRemoved)"]) }
        } catch {
            schedule.abandonPass()
            logger.error("Pruning event ids failed", metadata: ["error": "\(error)"])
        }
        return schedule.passUnderWay
    }

    /// A store read; a failure is logged and answered as `storeUnavailable`.
    func read<T>(_ body: () async throws -> T) async throws(EngineError) -> T {
        do {
            return try await body()
        } catch {
            logger.error("Store read failed", metadata: ["error": "\(error)"])
            throw .storeUnavailable
        }
    }

    func readAlerts(_ query: AlertQuery) async throws(EngineError) -> AlertPage {
        try queue.checkReadable()
        return try await read { try await syncStore.alerts(query) }
    }

    func readHistory(_ scope: FleetScope, _ resolution: HistoryResolution, from: Timestamp, to: Timestamp) async throws(EngineError) -> [HistoryPoint]
    {
        try queue.checkReadable()
        return try await read { try await syncStore.history(scope, resolution: resolution, from: from, to: to) }
    }

    /// After a commit: metrics and logs of the transitions, a nudge to the webhook sender, and the answers.
    func finish(_ jobs: [IngestJob], plan: GroupPlan, started: ContinuousClock.Instant) {
        metrics.commitDuration.recordNanoseconds(Int64((ContinuousClock.now - started).microseconds) * 1000)
        metrics.commits.increment()
        metrics.groupSize.record(jobs.count)
        for transition in plan.transitions {
            guard let counters = metrics.transitions[transition.kind] else { continue }
            (transition.change == .fire ? counters.fire : counters.resolve).increment()
            logger.info(
                transition.change == .fire ? "Alert fired" : "Alert resolved",
                metadata: ["alert.kind": "\(transition.kind.rawValue)", "alert.id": "\(transition.id)"]
            )
        }
        for removal in plan.changes.removals {
            (removal.reason == .forgotten ? metrics.devicesForgotten : metrics.devicesErased).increment()
        }
        if !plan.changes.outbox.isEmpty { delivery.outbox.notify() }
        if publishesTransitions && !plan.changes.alerts.isEmpty { feed.publish(plan.changes.alerts) }
        for (job, receipt) in zip(jobs, plan.receipts) {
            metrics.eventsAccepted.increment(by: receipt.accepted)
            metrics.eventsDuplicate.increment(by: receipt.duplicates)
            metrics.eventsRejected.increment(by: job.batch.rejected.count)
            job.continuation.resume(returning: .success(receipt))
        }
    }

    /// Answers the erasures of a committed group, and logs them.
    func finish(_ erasures: [ErasureJob], plan: GroupPlan, at now: Timestamp) {
        feed.erased(Set(zip(erasures, plan.erased).filter(\.1).map(\.0.key)))
        for (job, existed) in zip(erasures, plan.erased) {
            if existed { logger.notice("Device erased", metadata: ["app.id": "\(job.key.appId)"]) }
            job.continuation.resume(returning: .success((existed, now)))
        }
        for job in erasures.dropFirst(plan.erased.count) { job.continuation.resume(returning: .failure(.storeUnavailable)) }
    }

    /// Answers every request and erasure of a failed group.
    func fail(_ jobs: [IngestJob], erasures: [ErasureJob] = [], error: any Error) {
        metrics.commitFailures.increment()
        logger.error("Store commit failed; the group was not applied", metadata: ["error": "\(error)", "group.requests": "\(jobs.count)"])
        for job in jobs { job.continuation.resume(returning: .failure(.storeUnavailable)) }
        for job in erasures { job.continuation.resume(returning: .failure(.storeUnavailable)) }
    }
}
