import SyncHealthCore
import SyncHealthStore

/// A SQLite committer's open group keeps the ids it records, encoded as the journal and the tables key them.
typealias OpenSQLiteGroup = OpenGroup<[(hash: Int64, id: [UInt8])]>

extension OpenGroup where Judged == [(hash: Int64, id: [UInt8])] {
    /// Closes the open group and returns its entry: `changes` at `recordedAt`, with the ids it records.
    mutating func close(with changes: StoreChanges, at recordedAt: Timestamp) -> JournalEntry {
        let ids = close()
        var changes = changes
        changes.recordedAt = recordedAt
        return JournalEntry(changes, ids: ids)
    }
}
