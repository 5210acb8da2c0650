/// The group a committer has judged and not yet appended or abandoned, with what its judgement kept: at most one
/// (`GroupCommitter`'s order, checked here for every committer; a call out of that order traps).
public struct OpenGroup<Judged> {
    /// What `judge` kept for `append`; `nil` when no group is open.
    private var judged: Judged?

    /// No group open.
    public init() {}

    /// Traps when a group is open: `judge` checks it before it reads or begins anything.
    public func expectNoneOpen() {
        precondition(judged == nil, "GroupCommitter.judge with a group open")
    }

    /// Opens a group, keeping `judged` for its `append`.
    public mutating func open(_ judged: Judged) {
        expectNoneOpen()
        self.judged = judged
    }

    /// Closes the open group and returns what its judgement kept.
    public mutating func close() -> Judged {
        guard let judged else { preconditionFailure("GroupCommitter.append without judge") }
        self.judged = nil
        return judged
    }

    /// Closes the open group without an append.
    public mutating func abandon() {
        precondition(judged != nil, "GroupCommitter.abandon without judge")
        judged = nil
    }

    /// Checks that the series ends with no group open: a group judged and neither appended nor abandoned is a
    /// programming error.
    public func finish() {
        precondition(judged == nil, "a series of groups ended with a group open")
    }
}
