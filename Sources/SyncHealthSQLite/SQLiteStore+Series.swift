import GRDB
import SyncHealthCore
public import SyncHealthStore
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
                let committer = TablesCommitter(store: self, db: db, eventIdSpan: eventIdSpan)
                defer { committer.finish() }
                return try body(committer)
            }
        }
        try await foldIfOversized()
        return try await journal.perform { appender in
            let committer = JournalCommitter(store: self, appender: appender)
            defer { committer.finish() }
            return try body(committer)
        }
    }
}
