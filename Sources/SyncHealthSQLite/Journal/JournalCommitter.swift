import GRDB
import SyncHealthCore
import SyncHealthStore
import Synchronization

/// Commits the groups of a series on the journal's queue (`SQLiteStore.commitSeries`): `judge` reads the ids
/// recorded in the backlog and the tables, `append` writes the group's record to the journal.
final class JournalCommitter: GroupCommitter {
    let store: SQLiteStore
    let appender: CommitJournal.Appender
    private var group = OpenSQLiteGroup()

    init(store: SQLiteStore, appender: CommitJournal.Appender) {
        self.store = store
        self.appender = appender
    }

    func judge(_ claims: [EventIdClaim]) throws -> [Set<String>] {
        group.expectNoneOpen()
        let encoded = SQLiteStore.encoded(claims)
        let (seen, ids) = SQLiteStore.judged(claims, encoded, try store.recordedBeforeOnJournalQueue(encoded))
        group.open(ids)
        return seen
    }

    func append(_ changes: StoreChanges, at recordedAt: Timestamp) throws {
        let entry = group.close(with: changes, at: recordedAt)
        if !entry.isEmpty { try store.append(entry, with: appender) }
    }

    /// Checks that the series ends with no group open.
    func finish() { group.finish() }

    func abandon() { group.abandon() }

    var wantsBreak: Bool { store.backlog.withLock { $0.bytes } > SQLiteStore.maxBacklogBytes }
}
