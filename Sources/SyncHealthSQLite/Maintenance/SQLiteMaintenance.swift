import GRDB
import Logging
import Metrics
import NIOPosix
public import ServiceLifecycle
import SyncHealthCore
import SyncHealthStore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Folds the embedded store's journal into its tables when the backlog is 2 s old or 16 MiB large, then copies
/// the committed WAL pages into the database file on a second connection (a passive checkpoint, which never
/// blocks the writer or readers). Run it in the service group; it stops at graceful shutdown, after the engine
/// has closed the store (closing folds what is left).
///
/// Folds and checkpoints run on a thread of the service's own, whose priority is lowered by `niceness` (its nice
/// value; Linux keeps one per thread). A fold is a burst (up to 2 s of groups in one transaction) on cores shared
/// with the requests it holds up. GRDB's own threads run at `userInitiated`, which libdispatch on Linux maps above
/// the requests' priority; a thread of its own because an unprivileged process cannot raise a thread's priority
/// back, and GRDB's and dispatch's threads serve everything else too. Too low a priority lets folds fall behind a
/// heavy load and grow, so the default is a middle value (docs/benchmarks-log.md#the-folds-thread-and-its-cpu).
/// When the backlog passes `pressureBytes` the fold runs on GRDB's writer instead: under a
/// load the polite thread cannot keep up with, folding late only makes the folds larger.
///
/// A fold that fails leaves its groups in the journal and the backlog, and the next tick tries again. Until one
/// succeeds, `synchealth_store_journal_backlog_bytes` grows, `synchealth_store_fold_failures_total` counts each
/// attempt, and the first failure of a run of them is logged (and the recovery after it); once the backlog
/// passes 64 MiB, commits fold themselves and report the error to their requests.
public struct SQLiteMaintenance: Service {
    /// The folding thread's nice value above the process's.
    public static let defaultNiceness: Int32 = 4
    /// The backlog past which a fold runs at full priority.
    static let pressureBytes = 2 * SQLiteStore.foldBytes

    let store: SQLiteStore
    let logger: Logger
    /// How much the folding thread's nice value is raised; 0 keeps the process's priority.
    let niceness: Int32
    let foldFailures: Counter
    let backlogBytes: Gauge
    let reclaimedBytes: Counter
    /// When free pages go back to the file system, and how many a step.
    public var reclaimer = FreePageReclaimer()
    /// At most one step of returning free pages this often. Paced, because pages moved now are writes that ingestion
    /// waits behind, and the service has days to return what a day's expiry frees: at the default, 512 KiB a
    /// second, about 40 GB a day (docs/architecture.md#free-pages-go-back-to-the-file-system). `.zero`: every tick
    /// (a simulation whose days pass in seconds).
    public var reclaimEvery: Duration = .seconds(1)

    /// The maintenance of `store`; its metrics go to `metrics` (tests read them there).
    init(store: SQLiteStore, logger: Logger, niceness: Int32, metrics: any MetricsFactory = MetricsSystem.factory) {
        self.store = store
        self.logger = logger
        self.niceness = niceness
        foldFailures = Counter(label: "synchealth_store_fold_failures_total", factory: metrics)
        backlogBytes = Gauge(label: "synchealth_store_journal_backlog_bytes", factory: metrics)
        reclaimedBytes = Counter(label: "synchealth_store_reclaimed_bytes_total", factory: metrics)
    }

    public func run() async throws {
        let thread = NIOThreadPool(numberOfThreads: 1)
        thread.start()
        let lowered = Mutex(false)
        let niceness = self.niceness
        /// Runs `body` on the maintenance thread, lowering its priority the first time.
        func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
            try await thread.runIfActive {
                if !lowered.withLock({ $0 }) {
                    lowerCallingThreadPriority(by: niceness)
                    lowered.withLock { $0 = true }
                }
                return try body()
            }
        }
        let pacer = WritebackPacer(files: store.writebackFiles)
        var checkpointed = 0
        var failing = 0
        var reclaimer = self.reclaimer
        var nextReclaim = ContinuousClock.now
        if let counts = try? await store.pageCounts(), !counts.reclaimable {
            logger.notice(
                "The database keeps the pages it frees; run synchealth compact once, with the service stopped, to let it return them",
                metadata: ["store.free_pages": "\(counts.free)", "store.pages": "\(counts.pages)"]
            )
        }
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(50))
            if store.foldIsDue() {
                do {
                    if niceness > 0, store.backlog.withLock({ $0.bytes }) < Self.pressureBytes {
                        _ = try await pacer.during { try await onThread { try store.foldBlocking() } }
                    } else {
                        _ = try await pacer.during { try await store.fold() }
                    }
                    if failing > 0 {
                        logger.notice("Folding the journal into the tables works again", metadata: ["fold.failures": "\(failing)"])
                        failing = 0
                    }
                } catch {
                    foldFailures.increment()
                    if failing == 0 {
                        logger.error("Folding the journal into the tables failed; retrying", metadata: ["error": "\(error)"])
                    }
                    failing += 1
                }
            }
            // App Attest's counter moves (`CounterBook`): a crash loses at most a tick's.
            do {
                try await store.flushCounters()
            } catch {
                logger.error("Writing App Attest counters failed; retrying", metadata: ["error": "\(error)"])
            }
            // Erased devices' ids, a step a tick between folds (see `EventIds.sweepErased`).
            if store.erasuresPending.load(ordering: .acquiring) {
                do {
                    try await store.sweepErasedEventIds()
                } catch {
                    logger.error("Deleting erased devices' event ids failed; retrying", metadata: ["error": "\(error)"])
                }
            }
            // Free pages: at most a step each `reclaimEvery`.
            var reclaimed = false
            if ContinuousClock.now >= nextReclaim, let counts = try? await store.pageCounts(), counts.reclaimable {
                nextReclaim = ContinuousClock.now + reclaimEvery
                let pages = reclaimer.step(pageCount: counts.pages, freePages: counts.free)
                if pages > 0 {
                    do {
                        _ = try await pacer.during { try await onThread { try store.reclaimFreePagesBlocking(pages) } }
                        reclaimedBytes.increment(by: pages * counts.pageSize)
                        reclaimed = true
                    } catch {
                        logger.error("Returning free pages failed; retrying", metadata: ["error": "\(error)"])
                    }
                }
            }
            let (folds, bytes) = store.backlog.withLock { ($0.folds, $0.bytes) }
            backlogBytes.record(bytes)
            if folds != checkpointed || reclaimed {
                checkpointed = folds
                if niceness > 0 {
                    try? await pacer.during { try await onThread { store.checkpointer.checkpointBlocking() } }
                } else {
                    await pacer.during { await store.checkpointer.checkpoint() }
                }
            }
        }
        store.checkpointer.close()
        await pacer.shutdown()
        try? await thread.shutdownGracefully()
    }
}

/// Raises the calling thread's nice value by `niceness` (at most to 19). On Linux `setpriority` with `who` 0 sets
/// the calling thread's, not the process's.
func lowerCallingThreadPriority(by niceness: Int32) {
    guard niceness > 0 else { return }
    #if canImport(Glibc)
    let which = __priority_which_t(PRIO_PROCESS.rawValue)
    #else
    let which = PRIO_PROCESS
    #endif
    errno = 0
    let current = getpriority(which, 0)
    guard errno == 0 else { return }
    _ = setpriority(which, 0, min(19, current + niceness))
}
