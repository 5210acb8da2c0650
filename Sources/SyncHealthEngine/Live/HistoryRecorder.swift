public import Logging
public import ServiceLifecycle
public import SyncHealthCore
public import SyncHealthStore

/// Samples the fleet counters once a minute into the store's history: a minute point for every scope kept, and
/// the first sample of each hour as that hour's point. Both resolutions are pruned to their retention, and at most
/// `maxScopes` scopes (the whole fleet and the largest others) are kept a sample, so the history stays bounded
/// whatever the number of apps: `maxScopes` × (2,880 + 720) points at most.
///
/// Replicas sharing a store each sample; a slot is written once (`HistoryStore.recordHistory`).
public struct HistoryRecorder: Service {
    let engine: any EngineReads
    let store: any HistoryStore
    let maxScopes: Int
    let logger: Logger

    /// Records `engine`'s counters into `store`.
    public init(engine: any EngineReads, store: any HistoryStore, maxScopes: Int = 250, logger: Logger) {
        self.engine = engine
        self.store = store
        self.maxScopes = maxScopes
        self.logger = logger
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let next = HistoryResolution.minute.slot(engine.now) + HistoryResolution.minute.step
                do { try await engine.clock.sleep(until: next) } catch { return }
                guard engine.isReady else { continue }
                do {
                    try await sample(at: engine.now)
                } catch {
                    logger.warning("Recording fleet history failed", metadata: ["error": "\(error)"])
                }
            }
        }
    }

    /// Writes one sample taken at `now`, and prunes what has aged out.
    public func sample(at now: Timestamp) async throws {
        let scopes = FleetScopeSelection.largest(try await engine.summaries(), limit: maxScopes)
        for resolution in HistoryResolution.allCases {
            let slot = resolution.slot(now)
            try await store.recordHistory(scopes.map { HistoryPoint(at: slot, scope: $0.scope, counts: $0.counts) }, resolution: resolution)
            try await store.pruneHistory(resolution, before: now - resolution.retention)
        }
        logger.debug("Recorded fleet history", metadata: ["history.scopes": "\(scopes.count)"])
    }
}
