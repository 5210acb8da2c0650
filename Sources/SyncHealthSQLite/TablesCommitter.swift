import GRDB
import SyncHealthCore
import SyncHealthStore
import Synchronization

/// Commits the groups of a series straight into the tables, each in a transaction of its own, on the writer
/// (`SQLiteStore.commitSeries` on the `tables` path): `judge` begins it and reads the recorded ids, `append`
/// writes and commits it, so that nothing records an id in between.
final class TablesCommitter: GroupCommitter {
    let store: SQLiteStore
    let db: Database
    let eventIdSpan: Int64
    /// The ids the open group records; its transaction is open while it is.
    private var open: [(hash: Int64, id: [UInt8])]?

    init(store: SQLiteStore, db: Database, eventIdSpan: Int64) {
        self.store = store
        self.db = db
        self.eventIdSpan = eventIdSpan
    }

    func judge(_ claims: [EventIdClaim]) throws -> [Set<String>] {
        precondition(open == nil, "GroupCommitter.judge with a group open")
        let encoded = SQLiteStore.encoded(claims)
        try db.beginTransaction(.immediate)
        do {
            let (seen, ids) = SQLiteStore.judged(claims, encoded, try EventIds.recordedBefore(encoded, db).recorded)
            open = ids
            return seen
        } catch {
            try? db.rollback()
            throw error
        }
    }

    func append(_ changes: StoreChanges, at recordedAt: Timestamp) throws {
        guard let ids = open else { preconditionFailure("GroupCommitter.append without judge") }
        open = nil
        var changes = changes
        changes.recordedAt = recordedAt
        let entry = JournalEntry(changes, ids: ids)
        do {
            if !entry.isEmpty { try JournalEntry.write([entry], eventIdSpan: eventIdSpan, db) }
            try db.commit()
        } catch {
            try? db.rollback()
            throw error
        }
        if entry.erases { store.erasuresPending.store(true, ordering: .releasing) }
    }

    /// Checks that the series ends with no group open: a group judged and neither appended nor abandoned is a
    /// programming error.
    func finish() {
        precondition(open == nil, "a series of groups ended with a group open")
    }

    func abandon() {
        precondition(open != nil, "GroupCommitter.abandon without judge")
        open = nil
        try? db.rollback()
    }

    var wantsBreak: Bool { false }
}
