import GRDB
public import Logging
import Metrics
import NIOPosix
import ServiceLifecycle
import SyncHealthCore
import SyncHealthStore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension SQLiteStore {
    /// A fold starts once the backlog is `foldInterval` old (this by default, `--fold-interval`), or this large. A
    /// fold rewrites each page its groups touch once, however many of them touch it, so larger folds write fewer
    /// bytes an event; in exchange the backlog holds more in memory, and a restart after a crash replays more
    /// (docs/benchmarks-log.md#larger-folds-and-a-folds-frees-off-the-journals-queue).
    public static let defaultFoldInterval = Duration.seconds(2)
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
            return b.bytes >= Self.foldBytes || now - since >= foldInterval
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
