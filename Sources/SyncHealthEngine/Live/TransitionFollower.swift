public import Logging
public import ServiceLifecycle
import SyncHealthCore
public import SyncHealthStore
import Synchronization

/// Feeds a shared store's live views with the alert transitions every replica commits, so that a stream on one
/// replica shows the whole fleet, in commit order, and resumes on any replica (`LiveFeed`).
///
/// It listens to the store (`SharedSyncStore.followTransitions`); once listening, it rebuilds the feed from the
/// store's last transitions, then publishes what it hears, a batch at a time: the notices that arrived together are
/// read in one query. A replica's own commits reach its streams this way too, not from its pipeline, so that every
/// replica's order is the store's. When the connection fails, notices may have been missed: it listens again,
/// rebuilds, and every reader gets `reset`.
public struct TransitionFollower: Service {
    let engine: any EngineReads
    let store: any SharedSyncStore
    let logger: Logger
    /// How long to wait before listening again after a failure.
    let retryDelay: Duration

    /// Follows `store` into `engine.feed`.
    public init(engine: any EngineReads, store: any SharedSyncStore, retryDelay: Duration = .seconds(1), logger: Logger) {
        self.engine = engine
        self.store = store
        self.retryDelay = retryDelay
        self.logger = logger
    }

    var feed: LiveFeed { engine.feed }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            // Not before the engine has brought the schema up to date.
            while !engine.isReady && !Task.isCancelled { try? await Task.sleep(for: .milliseconds(20)) }
            let failures = Mutex(0)
            while !Task.isCancelled {
                do {
                    try await store.followTransitions { notices in
                        feed.rebuild(recent: try await store.recentTransitions(limit: feed.replayCapacity))
                        let failed = failures.withLock { f in
                            defer { f = 0 }
                            return f
                        }
                        if failed > 0 { logger.notice("Following alert transitions again", metadata: ["follow.failures": "\(failed)"]) }
                        try await follow(notices)
                    }
                } catch {
                    if Task.isCancelled { return }
                    let failed = failures.withLock { f in
                        f += 1
                        return f
                    }
                    if failed == 1 { logger.error("Following alert transitions failed; retrying", metadata: ["error": "\(error)"]) }
                }
                try? await Task.sleep(for: retryDelay)
            }
        }
    }

    /// Publishes the notices as they come, in batches: those that arrived while the last batch was read.
    func follow(_ notices: AsyncThrowingStream<TransitionNotice, any Error>) async throws {
        let pending = PendingNotices()
        let wake = WakeSignal()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    for try await notice in notices {
                        pending.state.withLock { $0.notices.append(notice) }
                        wake.signal()
                    }
                    pending.state.withLock { $0.ended = .success(()) }
                } catch {
                    pending.state.withLock { $0.ended = .failure(error) }
                }
                wake.signal()
            }
            defer { group.cancelAll() }
            while !Task.isCancelled {
                await wake.wait()
                let (batch, ended) = pending.state.withLock { p in
                    defer { p.notices = [] }
                    return (p.notices, p.ended)
                }
                if !batch.isEmpty { try await publish(batch) }
                if let ended { try ended.get() }
            }
        }
    }

    /// Publishes one batch in order: transitions as their rows now read (a fire as it fired), deletions as they
    /// leave the feed.
    func publish(_ batch: [TransitionNotice]) async throws {
        var ids: [String] = []
        for case .transition(let id, _) in batch { ids.append(id) }
        let rows = Dictionary(try await store.alerts(ids: Array(Set(ids))).map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        var run: [AlertRecord] = []
        for notice in batch {
            switch notice {
            case .transition(let id, let state):
                // Erased since: nothing to show.
                guard var alert = rows[id] else { continue }
                if state == .firing {
                    alert.state = .firing
                    alert.endsAt = nil
                    alert.reason = nil
                }
                run.append(alert)
            case .deleted(let id, let wasFiring):
                feed.publish(run)
                run = []
                feed.deleted(alertIds: [id], resetAlways: wasFiring)
            }
        }
        feed.publish(run)
    }
}

/// The notices heard and not yet published, and how the stream of them ended.
private final class PendingNotices: Sendable {
    let state = Mutex<(notices: [TransitionNotice], ended: Result<Void, any Error>?)>(([], nil))
}
