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

/// Commits the groups of a series, synchronously (see `LocalSyncStore.commitSeries`), each in two steps:
/// `judge` tells which of the group's event ids were recorded before, the caller plans the group on that, and
/// `append` writes the plan. Nothing else records an id between the two.
///
/// A committer holds at most one open group: `judge` opens it, `append` or `abandon` closes it, and the series
/// ends with none open. A call out of that order is a programming error and traps.
public protocol GroupCommitter: AnyObject {
    /// Opens a group: for each claim, the ids recorded before this call (earlier groups of the series included).
    ///
    /// Ids repeated within `claims` are not in the sets returned (they were not recorded before): the caller
    /// judges repeats within a group itself. If it throws, no group is open.
    func judge(_ claims: [EventIdClaim]) throws -> [Set<String>]

    /// Writes the open group: `changes`, and every id its claims record, at `recordedAt`; when it returns, they are
    /// durable. `changes.eventIds` is ignored. If it throws, nothing of the group is written, and the series may go
    /// on. Either way the group is closed.
    func append(_ changes: StoreChanges, at recordedAt: Timestamp) throws

    /// Closes the open group without writing anything.
    func abandon()

    /// Whether the store wants the series to end before another group (SQLite: a backlog to fold first).
    var wantsBreak: Bool { get }
}

extension GroupCommitter {
    /// One group: `judge`, then `plan` with what was recorded before, then `append` of the changes it returns; if
    /// `plan` throws, `abandon`. For tests of a store: the engine's pipelines call the steps themselves.
    @_spi(Testing) public func commit<Result>(
        claiming claims: [EventIdClaim],
        at recordedAt: Timestamp,
        plan: (_ seen: [Set<String>]) throws -> (changes: StoreChanges, result: Result)
    ) throws -> Result {
        let seen = try judge(claims)
        let planned: (changes: StoreChanges, result: Result)
        do {
            planned = try plan(seen)
        } catch {
            abandon()
            throw error
        }
        try append(planned.changes, at: recordedAt)
        return planned.result
    }
}

extension LocalSyncStore {
    /// One group, as a series of one (`GroupCommitter.commit(claiming:at:plan:)`): if `plan` or the write throws,
    /// nothing is written, ids included. For tests of a store.
    @_spi(Testing) public func commit<Result: Sendable>(
        claiming claims: [EventIdClaim],
        at recordedAt: Timestamp,
        plan: @escaping @Sendable (_ seen: [Set<String>]) throws -> (changes: StoreChanges, result: Result)
    )
        async throws -> Result
    {
        try await commitSeries { committer in try committer.commit(claiming: claims, at: recordedAt, plan: plan) }
    }
}
