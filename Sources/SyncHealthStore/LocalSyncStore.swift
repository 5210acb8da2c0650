public import SyncHealthCore

/// A store that this process alone writes (SQLite, or memory in tests), whose groups the local pipeline commits
/// in a series: one after another where the store commits, without a trip back to the engine's task in between.
///
/// Each trip from the engine's task to the store's commit thread and back costs two thread wake-ups on cores
/// that are busy with requests, once a group. Under load the next group is already waiting when one commits, so
/// the pipeline stays on the commit thread and takes it there; the series ends when nothing waits, or when the
/// store wants it to (`GroupCommitter.wantsBreak`). Why: docs/architecture.md, "Groups committed in a series".
public protocol LocalSyncStore: SyncStore {
    /// Runs `body` where the store commits (SQLite: the journal's queue, a thread that may block), with a
    /// committer for as many groups as `body` commits, one after another. `body` must not wait for anything that
    /// waits for the store.
    func commitSeries<T: Sendable>(_ body: @escaping @Sendable (any GroupCommitter) throws -> T) async throws -> T
}

/// Commits the groups of a series, synchronously (see `LocalSyncStore.commitSeries`).
public protocol GroupCommitter {
    /// `LocalSyncStore.commit(claiming:at:plan:)` for one group of the series: the ids recorded before this call
    /// (earlier groups of the series included) are passed to `plan`, and when it returns the changes are durable.
    /// If `plan` or the write throws, nothing of this group is written; the series may go on.
    func commit<Result>(
        claiming claims: [EventIdClaim],
        at recordedAt: Timestamp,
        plan: (_ seen: [Set<String>]) throws -> (changes: StoreChanges, result: Result)
    ) throws -> Result

    /// Whether the store wants the series to end before another group (SQLite: a backlog to fold first).
    var wantsBreak: Bool { get }
}

extension LocalSyncStore {
    /// One group, as a series of one: in one transaction, records every id in `claims` for its device, calls `plan`
    /// with, per claim, the ids that were recorded before this call, and writes the changes it returns.
    ///
    /// Ids repeated within `claims` are not in the sets passed to `plan` (they were not recorded before): the
    /// caller judges repeats within a group itself. If `plan` or the write throws, nothing is written, ids
    /// included. `changes.eventIds` is ignored: the claimed ids are what is recorded, at `recordedAt`.
    public func commit<Result: Sendable>(
        claiming claims: [EventIdClaim],
        at recordedAt: Timestamp,
        plan: @escaping @Sendable (_ seen: [Set<String>]) throws -> (changes: StoreChanges, result: Result)
    )
        async throws -> Result
    {
        try await commitSeries { committer in try committer.commit(claiming: claims, at: recordedAt, plan: plan) }
    }
}
