import Foundation
import GRDB
import Metrics
import SyncHealthCore
public import SyncHealthStore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The embedded default store: one SQLite database in WAL mode, through GRDB, behind a commit journal.
///
/// A commit is acknowledged once its group is in the journal (`CommitJournal`); the groups reach the tables in
/// folds of many groups at once (`fold()`, run by `maintenance`, and before any read that needs the tables).
/// Dedupe looks in the tables and in the groups not yet folded. Opening the store folds whatever the journal
/// still holds. The data directory is locked for the life of the store, so that two servers never share it.
public final class SQLiteStore: LocalSyncStore {
    /// How hard SQLite works to make a commit durable.
    public enum Synchronous: String, Sendable, CaseIterable {
        /// Survives a crash of the process; a power loss may roll back the last commits.
        case normal = "NORMAL"
        /// Survives a power loss too: every commit is on disk before it returns.
        case full = "FULL"
    }

    /// How a commit becomes durable.
    public enum CommitPath: String, Sendable, CaseIterable {
        /// The group is appended to the commit journal, one `fdatasync` of one sequential write; folds write many
        /// groups into the tables at once, later (docs/architecture.md says what this pays for).
        case journal
        /// The group is one SQLite transaction in the tables (WAL), durable at its commit.
        case tables
    }

    /// The most page cache, in KiB, each connection keeps (SQLite's default is 2 MiB).
    ///
    /// Every event costs B-tree descents into `devices` and the event-id tables: the commit's dedupe read and the fold's
    /// read and write. With SQLite's default a connection keeps few of those tables' pages, and each request reads
    /// pages back from the OS (docs/benchmarks-log.md#sqlite-settings). The memory is taken as pages are read: the
    /// writer and the reader that judges ids fill theirs, the others stay small.
    static let pageCacheKiB = 32 * 1024

    /// The database file's path.
    public let path: String
    let pool: DatabasePool
    /// The second connection that checkpoints for `maintenance`.
    let checkpointer: SQLiteCheckpointer
    /// The database file and WAL, open for `maintenance` to start their writeback while it folds.
    let writebackFiles: WritebackFiles
    let journal: CommitJournal
    let backlog = Mutex(JournalBacklog())
    /// Folds that wrote groups into the tables, and how long each took (its transaction and forgetting what it
    /// wrote): a fold is the store's largest burst of work, so the bench draws these beside its latencies.
    let foldsTotal = Counter(label: "synchealth_store_folds_total")
    let foldDuration = Timer(label: "synchealth_store_fold_duration_seconds")
    /// Claims the journal's dedupe judged without reading the tables (`EventIdCeilings`), and those it read.
    let claimsJudgedInMemory = Counter(label: "synchealth_store_dedupe_claims_total", dimensions: [("judged", "in_memory")])
    let claimsRead = Counter(label: "synchealth_store_dedupe_claims_total", dimensions: [("judged", "read")])
    /// How commits become durable.
    public let commitPath: CommitPath
    /// How old the journal's backlog gets before the maintenance service folds it (`foldIsDue`).
    public let foldInterval: Duration
    /// How long a generation of event ids takes ids, in microseconds (see `EventIds`).
    let eventIdSpan: Int64
    private let lockDescriptor: Int32
    /// Whether erased devices' event ids are waiting for `sweepErasedEventIds`.
    let erasuresPending = Atomic<Bool>(false)
    /// The sweep's pass under way.
    let erasureSweep = Mutex<EventIds.ErasureSweep?>(nil)
    /// How `backup(to:)` paces its copy (`BackupPacer`); tests slow it down to leave a copy time to be cancelled.
    let backupPace = Mutex((work: BackupPacer.defaultWork, pause: BackupPacer.defaultPause))
    /// App Attest's counters, moved in memory and written in the background.
    let counters = CounterBook()

    /// Opens (creating if needed) the store in `directory`.
    ///
    /// `eventIdGeneration` is how long each generation of event ids takes ids: expiry forgets a generation once
    /// all of it is older than the dedupe retention, so an id is remembered up to this much longer than that. A
    /// seventh of the retention keeps 8 generations. `foldInterval` is how old the journal's backlog gets before
    /// the maintenance service folds it into the tables.
    ///
    /// - Throws: `StoreError` with a message for the operator when the directory is locked by another server,
    ///   the database is corrupt, or it was written by a newer schema.
    public convenience init(
        directory: String,
        synchronous: Synchronous = .full,
        commitPath: CommitPath = .journal,
        eventIdGeneration: Duration = .seconds(86_400),
        foldInterval: Duration = SQLiteStore.defaultFoldInterval
    ) throws {
        try self.init(
            directory: directory,
            synchronous: synchronous,
            commitPath: commitPath,
            eventIdGeneration: eventIdGeneration,
            foldInterval: foldInterval,
            journalIO: .system
        )
    }

    /// Opens the store with the journal making its system calls through `journalIO` (tests make them fail).
    /// Whatever the commit path, a journal left by an earlier run is written into the tables first.
    init(
        directory: String,
        synchronous: Synchronous,
        commitPath: CommitPath = .journal,
        eventIdGeneration: Duration = .seconds(86_400),
        foldInterval: Duration = SQLiteStore.defaultFoldInterval,
        journalIO: JournalIO
    ) throws {
        self.commitPath = commitPath
        self.foldInterval = foldInterval
        let span = eventIdGeneration.components
        let eventIdSpan = max(1, span.seconds * 1_000_000 + span.attoseconds / 1_000_000_000_000)
        self.eventIdSpan = eventIdSpan
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw StoreError.unavailable(path: directory, reason: "cannot create it (\(error.localizedDescription))")
        }
        lockDescriptor = try Self.lockDirectory(directory)
        path = (directory as NSString).appendingPathComponent("synchealth.sqlite")
        do {
            try Self.checkHeader(path)
            try Self.createReclaimable(path)
            Self.restrictToOwner(path)
            var configuration = Configuration()
            configuration.busyMode = .timeout(5)
            configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA cache_size = -\(Self.pageCacheKiB)") }
            pool = try DatabasePool(path: path, configuration: configuration)
            // Only the writer commits, so only its setting matters. It is set after the pool is open: opening a
            // pool switches to WAL mode and sets `synchronous = NORMAL`, over anything `prepareDatabase` set.
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = \(synchronous.rawValue)")
            }
            let migrator = Self.migrator
            let path = self.path
            try pool.read { db in
                if try migrator.hasBeenSuperseded(db) { throw StoreError.newerSchema(path: path) }
            }
            try pool.writeWithoutTransaction { db in try Self.quickCheck(db, path: path) }
            try migrator.migrate(pool)
            checkpointer = try SQLiteCheckpointer(path: path)
            journal = try Self.recoverJournal(
                directory: directory,
                pool: pool,
                durable: synchronous == .full,
                eventIdSpan: eventIdSpan,
                io: journalIO
            )
            writebackFiles = WritebackFiles(paths: [path, path + "-wal"])
            let erasures = try pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM erased_event_ids") ?? 0 }
            erasuresPending.store(erasures > 0, ordering: .releasing)
        } catch let error as StoreError {
            closeDescriptor(lockDescriptor)
            throw error
        } catch let error as DatabaseError where [.SQLITE_NOTADB, .SQLITE_CORRUPT].contains(error.resultCode) {
            closeDescriptor(lockDescriptor)
            throw StoreError.corrupt(path: path, reason: error.message ?? "not a database")
        } catch {
            closeDescriptor(lockDescriptor)
            throw StoreError.unavailable(path: directory, reason: "\(error)")
        }
    }

    /// The writer connection's `PRAGMA synchronous`, as SQLite reports it: 1 is NORMAL, 2 is FULL.
    func effectiveSynchronous() async throws -> Int {
        try await pool.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
    }

    public func close() async throws {
        // The directory is released whatever happens below: the store is done with it.
        defer { closeDescriptor(lockDescriptor) }
        // No commit after this one; what the journal holds goes into the tables. If that fails, the journal
        // stays, and the next open writes it.
        journal.close()
        try await flushCounters()
        try await fold()
        // Fold the WAL back into the main file, so that a stopped server leaves one self-contained file. If
        // that fails, the WAL stays beside it and the next open replays it: nothing committed is lost.
        // The checkpointer may be running a pass for the last commit: SQLite then answers busy at once, without
        // waiting, so wait here (a pass takes milliseconds).
        var checkpointError: (any Error)?
        var busyAttempts = 0
        while true {
            do {
                _ = try await pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
                break
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY && busyAttempts < 100 {
                busyAttempts += 1
                try? await Task.sleep(for: .milliseconds(10))
            } catch {
                checkpointError = error
                break
            }
        }
        try pool.close()
        checkpointer.close()
        // Only now that no connection has them open (see `WritebackFiles`).
        writebackFiles.close()
        if let checkpointError { throw checkpointError }
    }
}
