import Foundation
import GRDB
import Metrics
public import SyncHealthCore
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

    /// SQLite's quick check of every table and its indexes but `event_ids`, which holds most of a store's pages
    /// once its window has filled, so that a start does not read the whole window (docs/architecture.md#event-ids-by-generation).
    /// A damaged page there fails the fold that reaches it, which keeps its groups in the journal; the backup's full
    /// integrity check covers it.
    static func quickCheck(_ db: Database, path: String) throws {
        let tables = try String.fetchAll(
            db,
            sql: "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'event_ids'"
        )
        // A table's name is not a value: PRAGMA takes it quoted, as an identifier, not bound.
        for table in ["sqlite_schema"] + tables {
            let check = try String.fetchOne(db, sql: "PRAGMA quick_check(\"\(table.replacingOccurrences(of: "\"", with: "\"\""))\")") ?? "no answer"
            if check != "ok" { throw StoreError.corrupt(path: path, reason: check) }
        }
    }

    /// Takes an exclusive, non-blocking lock on `directory/synchealth.lock`, released when the store closes or
    /// the process dies. The descriptor is close-on-exec: a `flock` belongs to the open file, so a child process
    /// that inherited it would hold the directory after this store closed.
    static func lockDirectory(_ directory: String) throws -> Int32 {
        let lockPath = (directory as NSString).appendingPathComponent("synchealth.lock")
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError.unavailable(path: directory, reason: "cannot open \(lockPath)") }
        // Close-on-exec still leaves a window: a child forked by another thread holds the open file from its fork to
        // its exec. A store closed and reopened in that window (a restart in-process, a test) would be refused
        // for a lock nobody wants, so a held lock is tried again for a while before it counts as another server's.
        var attempts = 0
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            attempts += 1
            guard attempts < lockAttempts else {
                closeDescriptor(fd)
                throw StoreError.locked(path: directory)
            }
            usleep(lockRetryMicroseconds)
        }
        return fd
    }

    /// How often, and how far apart, `lockDirectory` tries a held lock: half a second in all.
    static let lockAttempts = 25
    static let lockRetryMicroseconds: UInt32 = 20_000

    /// Refuses a file that exists but does not start with SQLite's header, before SQLite gets to touch it.
    static func checkHeader(_ path: String) throws {
        guard let handle = FileHandle(forReadingAtPath: path) else { return }
        defer { try? handle.close() }
        let header = (try? handle.read(upToCount: 16)) ?? Data()
        if header.isEmpty { return }
        if header != Data("SQLite format 3\0".utf8) {
            throw StoreError.corrupt(path: path, reason: "the file does not start with the SQLite header")
        }
    }

    /// Writes what the journal in `directory` holds beyond the tables into them, retires its segments, and opens
    /// the journal for the next commits.
    static func recoverJournal(directory: String, pool: DatabasePool, durable: Bool, eventIdSpan: Int64, io: JournalIO) throws -> CommitJournal {
        let contents = try CommitJournal.read(directory: directory)
        let folded = try pool.read { db in try Int64.fetchOne(db, sql: "SELECT folded_through FROM journal_state") ?? 0 }
        let entries = try contents.records.filter { $0.seq > folded }.map { record in
            do {
                return try JournalEntry(seq: record.seq, payload: record.payload)
            } catch {
                throw StoreError.corrupt(path: directory, reason: "journal record \(record.seq) checks out but cannot be decoded")
            }
        }
        if let last = entries.last?.seq {
            try pool.write { db in
                try JournalEntry.write(entries, eventIdSpan: eventIdSpan, db)
                try db.execute(sql: "UPDATE journal_state SET folded_through = ?", arguments: [last])
            }
        }
        let journal = CommitJournal(
            directory: directory,
            durable: durable,
            lastNumber: contents.segments.last ?? 0,
            lastSeq: max(folded, contents.lastSeq),
            io: io
        )
        journal.retire(contents.segments)
        return journal
    }

    public func loadState() async throws -> PersistedState {
        try await fold()
        guard commitPath == .journal else { return try await pool.read { db in try Self.state(db, ceilings: false).state } }
        // Every device's ceiling along with its state, so that a restarted store judges a device's next claim
        // without a read, as the process before it did. On the journal's queue, where every append runs, with
        // the backlog looked at before the tables, as a claim's first read does (`EventIdCeilings`).
        return try await journal.perform { _ in
            let backlogged = self.backlog.withLock { $0.highestIds() }
            let (state, ceilings) = try self.pool.read { db in try Self.state(db, ceilings: true) }
            self.backlog.withLock { b in
                b.ceilings.reserveCapacity(ceilings.count)
                for (hash, ceiling) in ceilings { b.ceilings.set(hash, max(ceiling, backlogged[hash] ?? .zero)) }
            }
            return state
        }
    }

    /// The devices, in the order they were created, and the fleet alerts; with `ceilings`, also the ceilings of
    /// event ids in the tables, by device hash (`EventIds`): a hash may come twice, and its ceiling is the higher.
    private static func state(
        _ db: Database,
        ceilings withCeilings: Bool
    ) throws -> (state: PersistedState, ceilings: [(hash: Int64, ceiling: EventIdCeilings.Prefix)]) {
        var devices: [DeviceRecord] = []
        var ceilings = withCeilings ? try EventIds.ceilingsApart(db) : []
        let rows = try Row.fetchCursor(db, sql: "SELECT app_id, device_id, state, id_ceiling FROM devices ORDER BY seq")
        while let row = try rows.next() {
            let key = DeviceKey(appId: row[0], deviceId: row[1])
            let blob: Data = row[2]
            do {
                devices.append(try DeviceRecord(key: key, binary: [UInt8](blob)))
            } catch {
                throw StoreError.undecodableRecord("device \(key)")
            }
            if withCeilings {
                // No ceiling in the row: the device recorded no id, or only under its hash (`ceilingsApart`).
                let bytes: Data? = row[3]
                ceilings.append((key.stableHash, bytes.map { EventIdCeilings.Prefix($0) } ?? .zero))
            }
        }
        var fleet: [String: Timestamp] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT container_id, starts_at FROM fleet_alerts") {
            fleet[row[0]] = Timestamp(microseconds: row[1])
        }
        return (PersistedState(devices: devices, fleetAlerts: fleet), ceilings)
    }

    /// Claims as the journal and the tables key them (`EventIds.Claim`).
    static func encoded(_ claims: [EventIdClaim]) -> [EventIds.Claim] {
        claims.map { (key: $0.key, hash: $0.key.stableHash, ids: $0.eventIds.map { Array($0.utf8) }) }
    }

    /// A group's judgement, given which of its claims' ids were `recorded` before it: per claim the ids seen
    /// before, and the ids the group records (each once; a repeat within the group is the planner's to judge).
    static func judged(
        _ claims: [EventIdClaim],
        _ encoded: [EventIds.Claim],
        _ recorded: [[Bool]]
    ) -> (seen: [Set<String>], ids: [(hash: Int64, id: [UInt8])]) {
        var seen: [Set<String>] = []
        seen.reserveCapacity(claims.count)
        var ids: [(hash: Int64, id: [UInt8])] = []
        ids.reserveCapacity(encoded.reduce(0) { $0 + $1.ids.count })
        // One set for the whole group, not one per device: a set is an allocation; sized once, not grown.
        var recordedNow = Set<ClaimedId>(minimumCapacity: ids.capacity)
        for ((claim, encodedClaim), recorded) in zip(zip(claims, encoded), recorded) {
            var before = Set<String>()
            for ((id, bytes), recorded) in zip(zip(claim.eventIds, encodedClaim.ids), recorded) {
                if recorded {
                    before.insert(id)
                } else if recordedNow.insert(ClaimedId(hash: encodedClaim.hash, id: bytes)).inserted {
                    ids.append((encodedClaim.hash, bytes))
                }
            }
            seen.append(before)
        }
        return (seen, ids)
    }

    /// An event id a group records, with its device's hash; its bytes hashed in one call (`EventIdBytes`).
    struct ClaimedId: Hashable {
        var hash: Int64
        var id: [UInt8]

        func hash(into hasher: inout Hasher) {
            hasher.combine(hash)
            id.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }

    /// Folds before a read of the alerts table when the backlog holds a change to it, so that the read sees every
    /// committed transition. Only then: the incident watch reads every firing alert a page at a time, every few
    /// seconds, and a fold a page was 50 folds in a second on the writer at 50,000 firing alerts.
    private func foldForAlerts() async throws {
        if backlog.withLock({ $0.changesAlerts }) { try await fold() }
    }

    public func alerts(_ query: AlertQuery) async throws -> AlertPage {
        try await foldForAlerts()
        return try await pool.read { db in
            var conditions: [String] = []
            var arguments: [any DatabaseValueConvertible] = []
            if let cursor = query.cursor {
                conditions.append("seq < ?")
                arguments.append(cursor)
            }
            if let state = query.state {
                conditions.append("state = ?")
                arguments.append(state.rawValue)
            }
            if let kind = query.kind {
                conditions.append("kind = ?")
                arguments.append(kind.rawValue)
            }
            if let appId = query.appId {
                conditions.append("app_id = ?")
                arguments.append(appId)
            }
            if let deviceId = query.deviceId {
                conditions.append("device_id = ?")
                arguments.append(deviceId)
            }
            let whereClause = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
            arguments.append(query.limit + 1)
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.alertColumns)
                    FROM alerts \(whereClause) ORDER BY seq DESC LIMIT ?
                    """,
                arguments: StatementArguments(arguments)
            )
            let alerts = try rows.prefix(query.limit).map(Self.alert)
            let next: Int64? = rows.count > query.limit ? rows[query.limit - 1][0] : nil
            return AlertPage(alerts: alerts, nextCursor: next)
        }
    }

    /// The columns `alert(_:)` decodes.
    static let alertColumns = "seq, id, kind, state, app_id, device_id, container_id, starts_at, ends_at, summary, detail, reason, app_version"

    /// An alert from a row of `alertColumns`.
    static func alert(_ row: Row) throws -> AlertRecord {
        guard let kind = AlertKind(rawValue: row[2]), let state = AlertState(rawValue: row[3]) else {
            throw StoreError.undecodableRecord("alert \(String(describing: row[1] as String?))")
        }
        return AlertRecord(
            id: row[1],
            kind: kind,
            state: state,
            deviceId: row[5],
            appId: row[4],
            containerId: row[6],
            startsAt: Timestamp(microseconds: row[7]),
            endsAt: (row[8] as Int64?).map(Timestamp.init(microseconds:)),
            summary: row[9],
            detail: row[10],
            reason: (row[11] as String?).flatMap(ResolveReason.init(rawValue:)),
            appVersion: row[12]
        )
    }

    public func recentTransitions(limit: Int) async throws -> [AlertRecord] {
        try await foldForAlerts()
        return try await pool.read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.alertColumns)
                    FROM alerts
                    WHERE seq IN (SELECT seq FROM alerts ORDER BY seq DESC LIMIT ?)
                       OR seq IN (SELECT seq FROM alerts WHERE state = 'resolved' ORDER BY ends_at DESC LIMIT ?)
                    ORDER BY seq
                    """,
                arguments: [limit, limit]
            )
            return AlertTransitions.recent(try rows.map(Self.alert), limit: limit)
        }
    }

    public func pruneEventIds(recordedBefore cutoff: Timestamp, limit: Int) async throws -> Int {
        try await fold()
        return try await pool.write { db in
            try EventIds.prune(recordedBefore: cutoff.microseconds, limit: limit, db)
        }
    }

    public func pruneHistory(before cutoff: Timestamp, limit: Int) async throws -> Int {
        try await fold()
        return try await pool.write { db in
            let at = cutoff.microseconds
            try db.execute(
                sql: """
                    DELETE FROM alerts WHERE seq IN
                        (SELECT seq FROM alerts WHERE state = 'resolved' AND ends_at < ? ORDER BY ends_at LIMIT ?)
                    """,
                arguments: [at, limit]
            )
            var removed = db.changesCount
            // The oldest attempts only: where none is old enough, this reads `limit` rows, not the whole log.
            try db.execute(
                sql: "DELETE FROM deliveries WHERE seq IN (SELECT seq FROM deliveries ORDER BY seq LIMIT ?) AND attempted_at < ?",
                arguments: [limit - removed, at]
            )
            removed += db.changesCount
            try db.execute(
                sql: "DELETE FROM incidents WHERE seq IN (SELECT seq FROM incidents WHERE state = 'resolved' AND resolved_at < ? LIMIT ?)",
                arguments: [at, limit - removed]
            )
            return removed + db.changesCount
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

/// Closes a file descriptor (the store's own `close()` shadows the C function).
func closeDescriptor(_ fd: Int32) {
    _ = close(fd)
}
