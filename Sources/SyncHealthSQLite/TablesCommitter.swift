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
    /// The group judged; its transaction is open while it is.
    private var group = OpenSQLiteGroup()

    init(store: SQLiteStore, db: Database, eventIdSpan: Int64) {
        self.store = store
        self.db = db
        self.eventIdSpan = eventIdSpan
    }

    func judge(_ claims: [EventIdClaim]) throws -> [Set<String>] {
        group.expectNoneOpen()
        let encoded = SQLiteStore.encoded(claims)
        try db.beginTransaction(.immediate)
        do {
            let (seen, ids) = SQLiteStore.judged(claims, encoded, try EventIds.recordedBefore(encoded, db).recorded)
            group.open(ids)
            return seen
        } catch {
            try? db.rollback()
            throw error
        }
    }

    func append(_ changes: StoreChanges, at recordedAt: Timestamp) throws {
        let entry = group.close(with: changes, at: recordedAt)
        do {
            if !entry.isEmpty { try JournalEntry.write([entry], eventIdSpan: eventIdSpan, db) }
            try db.commit()
        } catch {
            try? db.rollback()
            throw error
        }
        if entry.erases { store.erasuresPending.store(true, ordering: .releasing) }
    }

    /// Checks that the series ends with no group open.
    func finish() { group.finish() }

    func abandon() {
        group.abandon()
        try? db.rollback()
    }

    var wantsBreak: Bool { false }
}
