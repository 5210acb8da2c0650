import GRDB
import SyncHealthCore
import SyncHealthStore
import Synchronization

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
            let recorded = try EventIds.recordedBefore(encoded, db).recorded
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
