import SyncHealthCore
import SyncHealthStore

/// The group a SQLite committer has judged and not yet appended or abandoned: at most one (`GroupCommitter`'s
/// order, checked here for both commit paths).
struct OpenGroup {
    /// The ids the open group records; `nil` when no group is open.
    private var ids: [(hash: Int64, id: [UInt8])]?

    /// Traps when a group is open: `judge` checks it before it reads or begins anything.
    func expectNoneOpen() {
        precondition(ids == nil, "GroupCommitter.judge with a group open")
    }

    /// Opens a group that records `ids`.
    mutating func open(_ ids: [(hash: Int64, id: [UInt8])]) {
        expectNoneOpen()
        self.ids = ids
    }

    /// Closes the open group and returns its entry: `changes` at `recordedAt`, with the ids it records.
    mutating func close(with changes: StoreChanges, at recordedAt: Timestamp) -> JournalEntry {
        guard let ids else { preconditionFailure("GroupCommitter.append without judge") }
        self.ids = nil
        var changes = changes
        changes.recordedAt = recordedAt
        return JournalEntry(changes, ids: ids)
    }

    /// Closes the open group without an entry.
    mutating func abandon() {
        precondition(ids != nil, "GroupCommitter.abandon without judge")
        ids = nil
    }

    /// Checks that the series ends with no group open: a group judged and neither appended nor abandoned is a
    /// programming error.
    func finish() {
        precondition(ids == nil, "a series of groups ended with a group open")
    }
}
