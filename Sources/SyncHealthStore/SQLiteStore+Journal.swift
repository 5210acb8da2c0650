import GRDB
public import Logging
import Metrics
import NIOPosix
public import ServiceLifecycle
import SyncHealthCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The groups that are in the journal and not yet in the tables, in journal order, with the event ids they
/// recorded (dedupe looks here as well as in the tables).
///
/// It lives behind a lock that every commit takes twice, so a fold's bookkeeping must not hold it long. The ids are
/// kept in generations: a fold starts a new one when it takes its entries, and forgets the generations it wrote
/// whole, instead of rebuilding the set from the entries left. What it forgets is handed back (`Forgotten`) and
/// released after the lock: rebuilding and releasing under it made every commit wait for the fold's bookkeeping.
struct JournalBacklog: Sendable {
    /// Ids by device hash.
    typealias Ids = [Int64: Set<[UInt8]>]

    /// What `remove` took out, for the caller to release once the lock is let go.
    struct Forgotten: Sendable {
        fileprivate var entries: [JournalEntry]
        fileprivate var ids: [Ids]
    }

    private(set) var entries: [JournalEntry] = []
    /// The journal bytes of each entry.
    private var sizes: [Int] = []
    /// The ids of the entries added since the last fold took its entries.
    private var ids: Ids = [:]
    /// The ids of the entries folds took and have not yet forgotten, each with the newest entry it covers.
    private var taken: [(through: Int64, ids: Ids)] = []
    /// The journal bytes of `entries`.
    private(set) var bytes = 0
    /// When the oldest entry was written.
    private(set) var since: ContinuousClock.Instant?
    /// Folds so far (the maintenance service checkpoints after each).
    var folds = 0
    /// What the journal's dedupe knows without a read; `add` raises them, so they cover the backlog's ids.
    var ceilings = EventIdCeilings()

    mutating func add(_ entry: JournalEntry, bytes: Int, at now: ContinuousClock.Instant) {
        for (hash, id) in entry.ids {
            ids[hash, default: []].insert(id)
            ceilings.raise(hash, toCover: id)
        }
        for removal in entry.removals {
            let hash = removal.key.stableHash
            let erased = removal.reason == .erased
            // An erased device's ids are forgotten here too: they must not answer for the device's next posts.
            if erased {
                ids[hash] = nil
                for g in taken.indices { taken[g].ids[hash] = nil }
            }
            ceilings.removed(hash, erased: erased)
        }
        entries.append(entry)
        sizes.append(bytes)
        self.bytes += bytes
        if since == nil { since = now }
    }

    /// The entries for a fold to write (those it has not written yet, it filters after the lock). Ids added from
    /// now on start a new generation.
    mutating func take() -> [JournalEntry] {
        if let last = entries.last?.seq, !ids.isEmpty {
            taken.append((last, ids))
            ids = [:]
        }
        return entries
    }

    /// Forgets the entries a fold wrote into the tables, and the id generations they cover.
    mutating func remove(through seq: Int64, at now: ContinuousClock.Instant) -> Forgotten {
        let folded = entries.prefix { $0.seq <= seq }.count
        let all = entries
        entries = Array(all[folded...])
        sizes.removeFirst(folded)
        var forgotten = Forgotten(entries: all, ids: [])
        taken.removeAll { generation in
            guard generation.through <= seq else { return false }
            forgotten.ids.append(generation.ids)
            return true
        }
        bytes = sizes.reduce(0, +)
        since = entries.isEmpty ? nil : now
        folds += 1
        return forgotten
    }

    func contains(_ hash: Int64, _ id: [UInt8]) -> Bool {
        if ids[hash]?.contains(id) == true { return true }
        return taken.contains { $0.ids[hash]?.contains(id) == true }
    }

    /// The ceiling of the device's ids in the backlog (`EventIdCeilings.Prefix.zero` for none).
    func highest(_ hash: Int64) -> EventIdCeilings.Prefix {
        let generations = [ids[hash]] + taken.map { $0.ids[hash] }
        return generations.lazy.compactMap { $0 }.joined().map { EventIdCeilings.Prefix($0) }.max() ?? .zero
    }
}

extension SQLiteStore {
    /// A fold starts once the backlog is this old, or this large. A fold rewrites each page its groups touch
    /// once, however many of them touch it, so larger folds write fewer bytes an event; in exchange the backlog
    /// holds more in memory, and a restart after a crash replays more (docs/benchmarks-log.md#larger-folds-and-a-folds-frees-off-the-journals-queue).
    static let foldInterval = Duration.seconds(2)
    static let foldBytes = 16 << 20
    /// A commit that finds more than this in the backlog folds it before it returns, so that a writer that falls
    /// behind slows ingestion down instead of growing the backlog without bound.
    static let maxBacklogBytes = 64 << 20

    /// Writes `entry` to the journal; on return it is durable (with `synchronous = FULL`) and in the backlog.
    func append(_ entry: JournalEntry) async throws {
        try await foldIfOversized()
        try await journal.perform { appender in try self.append(entry, with: appender) }
    }

    /// Writes `entry` to the journal from inside `CommitJournal.perform`, and adds it to the backlog.
    func append(_ entry: JournalEntry, with appender: CommitJournal.Appender) throws {
        let payload = entry.encoded()
        var written = entry
        written.seq = try appender.append(payload)
        backlog.withLock { $0.add(written, bytes: payload.count, at: .now) }
    }

    /// Folds a backlog over `maxBacklogBytes`. A commit calls it before it writes anything, so that a failing
    /// fold fails the commit: once the record is in the journal, the commit must not report a failure.
    func foldIfOversized() async throws {
        if backlog.withLock({ $0.bytes }) > Self.maxBacklogBytes { try await fold() }
    }

    /// Whether the backlog is old or large enough for the maintenance service to fold it.
    func foldIsDue(now: ContinuousClock.Instant = .now) -> Bool {
        backlog.withLock { b in
            guard let since = b.since else { return false }
            return b.bytes >= Self.foldBytes || now - since >= Self.foldInterval
        }
    }

    /// Writes every group in the backlog into the tables, in one transaction, and deletes the journal segments
    /// that held only those. Returns how many groups it wrote.
    @discardableResult
    func fold() async throws -> Int {
        await journal.seal()
        let written = try await pool.writeWithoutTransaction { db in try self.foldBacklog(db, politely: false) }
        guard let written else { return 0 }
        await journal.discard(through: written.seq)
        return written.count
    }

    /// `fold()`, run on the calling thread (GRDB runs a blocking write's closure on the thread that asks for it):
    /// the maintenance service folds on a thread of its own, of lower priority. What the commits also need (the
    /// journal's queue, the backlog's lock) it still takes on the journal's queue, never on that thread: a commit
    /// must not wait for a thread the scheduler puts last.
    @discardableResult
    func foldBlocking() throws -> Int {
        journal.sealBlocking()
        let written = try pool.writeWithoutTransaction { db in try self.foldBacklog(db, politely: true) }
        guard let written else { return 0 }
        journal.discardBlocking(through: written.seq)
        return written.count
    }

    /// Writes the backlog into the tables in one transaction on the writer `db`, then forgets it; returns the last
    /// group written and how many, or `nil` when there was nothing to write. `politely`: from the maintenance
    /// thread, which takes the backlog's lock on the journal's queue (see `withBacklog`).
    private func foldBacklog(_ db: Database, politely: Bool) throws -> (seq: Int64, count: Int)? {
        let started = ContinuousClock.now
        var written: (seq: Int64, count: Int)?
        try db.inTransaction {
            // A fold forgets what it wrote before it lets the writer go, so no entry here should be at or
            // below `done`; skipped all the same: writing an older group again would put older device states back.
            let done = try Int64.fetchOne(db, sql: "SELECT folded_through FROM journal_state") ?? 0
            let entries = self.withBacklog(politely: politely, empty: []) { $0.take() }.filter { $0.seq > done }
            guard let last = entries.last?.seq else { return .commit }
            try JournalEntry.write(entries, eventIdSpan: eventIdSpan, db)
            try db.execute(sql: "UPDATE journal_state SET folded_through = ?", arguments: [last])
            written = (last, entries.count)
            if entries.contains(where: \.erases) { erasuresPending.store(true, ordering: .releasing) }
            return .commit
        }
        // Committed: the groups can leave the backlog. What they held is released here, on the writer's
        // thread, after the lock and off Swift's concurrency pool (thousands of entries take milliseconds).
        if let written {
            let forgotten = withBacklog(politely: politely, empty: JournalBacklog.Forgotten(entries: [], ids: [])) {
                $0.remove(through: written.seq, at: .now)
            }
            withExtendedLifetime(forgotten) {}
            foldsTotal.increment()
            foldDuration.recordNanoseconds(Int64((ContinuousClock.now - started).microseconds) * 1000)
        }
        return written
    }

    /// `backlog.withLock(body)`; `politely`, on the journal's queue and waiting for it there, so that a thread of
    /// low priority never holds the lock that every commit takes twice (a preempted low-priority holder stalls every
    /// commit behind it).
    ///
    /// The result is taken out of the box it crosses threads in, and `empty` left there: the queue lets go of its
    /// block, and with it the box, whenever it gets to it, and whoever lets go last frees what the box holds: a
    /// fold's `Forgotten` freed on the queue would hold up every commit behind it.
    func withBacklog<T: Sendable>(politely: Bool, empty: T, _ body: @escaping @Sendable (inout JournalBacklog) -> T) -> T {
        guard politely else { return backlog.withLock { body(&$0) } }
        let result = Mutex(empty)
        journal.onQueueBlocking {
            let value = self.backlog.withLock { body(&$0) }
            result.withLock { $0 = value }
        }
        return result.withLock { box in
            var value = empty
            swap(&box, &value)
            return value
        }
    }

    /// The service that folds the journal into the tables in the background and checkpoints after each fold,
    /// logging to `logger`. Without it the store works the same: reads that need the tables fold first, and so
    /// does a commit that finds the backlog over `maxBacklogBytes`.
    ///
    /// - Parameter niceness: how much lower the priority of the thread that folds is (its nice value, raised by this
    ///   much); 0 folds at the process's priority.
    public func maintenance(logger: Logger, niceness: Int32 = SQLiteMaintenance.defaultNiceness) -> SQLiteMaintenance {
        SQLiteMaintenance(store: self, logger: logger, niceness: niceness)
    }
}

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
    let foldFailures = Counter(label: "synchealth_store_fold_failures_total")
    let backlogBytes = Gauge(label: "synchealth_store_journal_backlog_bytes")
    let reclaimedBytes = Counter(label: "synchealth_store_reclaimed_bytes_total")
    /// When free pages go back to the file system (tests make it eager).
    var reclaimer = FreePageReclaimer()

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
        var tick = 0
        if let counts = try? await store.pageCounts(), !counts.reclaimable {
            logger.notice(
                "The database keeps the pages it frees; run synchealth compact once, with the service stopped, to let it return them",
                metadata: ["store.free_pages": "\(counts.free)", "store.pages": "\(counts.pages)"]
            )
        }
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(50))
            tick += 1
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
            // Erased devices' ids, a step a tick between folds (see `EventIds.sweepErased`).
            if store.erasuresPending.load(ordering: .acquiring) {
                do {
                    try await store.sweepErasedEventIds()
                } catch {
                    logger.error("Deleting erased devices' event ids failed; retrying", metadata: ["error": "\(error)"])
                }
            }
            // Free pages: looked at each second, and each tick while a run of steps is under way.
            var reclaimed = false
            if reclaimer.reclaiming || tick % 20 == 0, let counts = try? await store.pageCounts(), counts.reclaimable {
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

extension JournalEntry {
    /// Writes `entries` into the tables, as if one after the other: each device's last record (new devices in the
    /// order they first appear), every id once (in generations of `eventIdSpan` microseconds), alerts, fleet alerts
    /// and webhook messages in order, then the removals of each entry (`DeviceRemoval`).
    static func write(_ entries: [JournalEntry], eventIdSpan: Int64, _ db: Database) throws {
        // Each device's last record since it last left; a device that leaves and comes back in these entries is
        // deleted, then inserted again at the end of the list.
        var slot: [DeviceKey: Int] = [:]
        var devices: [(appId: String, deviceId: String, state: [UInt8])?] = []
        var removed: [DeviceKey] = []
        for entry in entries {
            for d in entry.devices {
                let key = DeviceKey(appId: d.appId, deviceId: d.deviceId)
                if let s = slot[key] {
                    devices[s] = d
                } else {
                    slot[key] = devices.count
                    devices.append(d)
                }
            }
            for r in entry.removals {
                if let s = slot.removeValue(forKey: r.key) { devices[s] = nil }
                removed.append(r.key)
            }
        }
        if !removed.isEmpty {
            let delete = try FastStatement(db, "DELETE FROM devices WHERE app_id = ? AND device_id = ?")
            for key in removed { try delete.run(.text(key.appId), .text(key.deviceId)) }
        }
        let upsertDevice = try FastStatement(
            db,
            """
            INSERT INTO devices (app_id, device_id, state) VALUES (?, ?, ?)
            ON CONFLICT (app_id, device_id) DO UPDATE SET state = excluded.state
            """
        )
        for case let d? in devices { try upsertDevice.run(.text(d.appId), .text(d.deviceId), .blob(d.state)) }

        // The ids of the entries up to each removal go in before it, so that the removal covers them and not the
        // ids of the entries after it (a device that comes back gets a new ceiling).
        var idsFrom = 0
        for (i, entry) in entries.enumerated() where !entry.removals.isEmpty || i == entries.count - 1 {
            let run = entries[idsFrom...i]
            idsFrom = i + 1
            if run.contains(where: { !$0.ids.isEmpty }) {
                let ids = run.lazy.flatMap { entry in entry.ids.lazy.map { (hash: $0.hash, id: $0.id, at: entry.recordedAt) } }
                try EventIds.record(ids, span: eventIdSpan, db)
            }
            if !entry.removals.isEmpty { try EventIds.forget(entry.removals, at: entry.recordedAt, db) }
        }

        let upsertAlert = try db.cachedStatement(
            sql: """
                INSERT INTO alerts (id, kind, state, app_id, device_id, container_id, starts_at, ends_at, summary, detail, reason)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET state = excluded.state, ends_at = excluded.ends_at,
                    summary = excluded.summary, detail = excluded.detail, reason = excluded.reason
                """
        )
        for entry in entries {
            for a in entry.alerts {
                try upsertAlert.execute(arguments: [
                    a.id, a.kind.rawValue, a.state.rawValue, a.appId, a.deviceId, a.containerId,
                    a.startsAt.microseconds, a.endsAt?.microseconds, a.summary, a.detail, a.reason?.rawValue,
                ])
            }
            for (container, startsAt) in entry.fleet {
                if let startsAt {
                    try db.execute(
                        sql: "INSERT OR REPLACE INTO fleet_alerts (container_id, starts_at) VALUES (?, ?)",
                        arguments: [container, startsAt.microseconds]
                    )
                } else {
                    try db.execute(sql: "DELETE FROM fleet_alerts WHERE container_id = ?", arguments: [container])
                }
            }
            try SQLiteStore.insertOutbox(entry.outbox, db)
            for removal in entry.removals where removal.reason == .erased {
                try db.execute(
                    sql: "DELETE FROM alerts WHERE app_id = ? AND device_id = ?",
                    arguments: [removal.key.appId, removal.key.deviceId]
                )
                for key in removal.orderingKeys {
                    try db.execute(sql: "DELETE FROM outbox WHERE ordering_key = ?", arguments: [key])
                }
            }
        }
    }

    /// Whether the entry erases a device.
    var erases: Bool { removals.contains { $0.reason == .erased } }

    /// Whether the entry writes nothing.
    var isEmpty: Bool { devices.isEmpty && ids.isEmpty && alerts.isEmpty && fleet.isEmpty && outbox.isEmpty && removals.isEmpty }
}
