import GRDB
import SyncHealthCore
import Synchronization

extension SQLiteStore {
    /// Runs `body` on the journal's queue: each group it commits is judged against the backlog and the tables,
    /// planned, and appended to the journal there. Appends happen only on that queue, so nothing records an id
    /// between a group's judgement and its append. On the `tables` path the series runs on the writer instead,
    /// each group one transaction.
    ///
    /// A backlog over `maxBacklogBytes` is folded before the series starts, and ends it (`wantsBreak`): a fold
    /// that fails then fails the series before anything is written, never a group after its record is in the
    /// journal.
    public func commitSeries<T: Sendable>(_ body: @escaping @Sendable (any GroupCommitter) throws -> T) async throws -> T {
        if commitPath == .tables {
            return try await pool.writeWithoutTransaction { [eventIdSpan] db in
                try body(TablesCommitter(store: self, db: db, eventIdSpan: eventIdSpan))
            }
        }
        try await foldIfOversized()
        return try await journal.perform { appender in try body(JournalCommitter(store: self, appender: appender)) }
    }
}

/// Commits the groups of a series on the journal's queue (`SQLiteStore.commitSeries`).
struct JournalCommitter: GroupCommitter {
    let store: SQLiteStore
    let appender: CommitJournal.Appender

    func commit<Result>(
        claiming claims: [EventIdClaim],
        at recordedAt: Timestamp,
        plan: (_ seen: [Set<String>]) throws -> (changes: StoreChanges, result: Result)
    ) throws -> Result {
        let encoded = SQLiteStore.encoded(claims)
        let recorded = try store.recordedBeforeOnJournalQueue(encoded)
        let (entry, result) = try SQLiteStore.judge(claims, encoded, recorded, at: recordedAt, plan: plan)
        if !entry.isEmpty { try store.append(entry, with: appender) }
        return result
    }

    var wantsBreak: Bool { store.backlog.withLock { $0.bytes } > SQLiteStore.maxBacklogBytes }
}

/// Commits the groups of a series straight into the tables, each in a transaction of its own, on the writer
/// (`SQLiteStore.commitSeries` on the `tables` path).
struct TablesCommitter: GroupCommitter {
    let store: SQLiteStore
    let db: Database
    let eventIdSpan: Int64

    func commit<Result>(
        claiming claims: [EventIdClaim],
        at recordedAt: Timestamp,
        plan: (_ seen: [Set<String>]) throws -> (changes: StoreChanges, result: Result)
    ) throws -> Result {
        let encoded = SQLiteStore.encoded(claims)
        // One transaction reads the recorded ids and writes the group: nothing records an id in between.
        try db.beginTransaction(.immediate)
        do {
            let recorded = try SQLiteStore.recordedBefore(encoded, recent: encoded.map { Array(repeating: false, count: $0.ids.count) }, db)
            let (entry, result) = try SQLiteStore.judge(claims, encoded, recorded, at: recordedAt, plan: plan)
            if !entry.isEmpty { try JournalEntry.write([entry], eventIdSpan: eventIdSpan, db) }
            try db.commit()
            if entry.erases { store.erasuresPending.store(true, ordering: .releasing) }
            return result
        } catch {
            try? db.rollback()
            throw error
        }
    }

    var wantsBreak: Bool { false }
}
