import GRDB
import SyncHealthCore
import SyncHealthStore
import Synchronization

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
