import GRDB
import SyncHealthCore
import SyncHealthStore
import Synchronization

/// Commits the groups of a series on the journal's queue (`SQLiteStore.commitSeries`): `judge` reads the ids
/// recorded in the backlog and the tables, `append` writes the group's record to the journal.
final class JournalCommitter: GroupCommitter {
    let store: SQLiteStore
    let appender: CommitJournal.Appender
    /// The ids the open group records.
    private var open: [(hash: Int64, id: [UInt8])]?

    init(store: SQLiteStore, appender: CommitJournal.Appender) {
        self.store = store
        self.appender = appender
    }

    func judge(_ claims: [EventIdClaim]) throws -> [Set<String>] {
        precondition(open == nil, "GroupCommitter.judge with a group open")
        let encoded = SQLiteStore.encoded(claims)
        let (seen, ids) = SQLiteStore.judged(claims, encoded, try store.recordedBeforeOnJournalQueue(encoded))
        open = ids
        return seen
    }

    func append(_ changes: StoreChanges, at recordedAt: Timestamp) throws {
        guard let ids = open else { preconditionFailure("GroupCommitter.append without judge") }
        open = nil
        var changes = changes
        changes.recordedAt = recordedAt
        let entry = JournalEntry(changes, ids: ids)
        if !entry.isEmpty { try store.append(entry, with: appender) }
    }

    /// Checks that the series ends with no group open: a group judged and neither appended nor abandoned is a
    /// programming error.
    func finish() {
        precondition(open == nil, "a series of groups ended with a group open")
    }

    func abandon() {
        precondition(open != nil, "GroupCommitter.abandon without judge")
        open = nil
    }

    var wantsBreak: Bool { store.backlog.withLock { $0.bytes } > SQLiteStore.maxBacklogBytes }
}
