/// The group a committer has judged and not yet appended or abandoned, with what its judgement kept: at most one
/// (`GroupCommitter`'s order, checked here for every committer; a call out of that order traps). Inlinable, so
/// that each committer's module specialises it: it is on every group's path.
public struct OpenGroup<Judged> {
    /// What `judge` kept for `append`; `nil` when no group is open.
    @usableFromInline var judged: Judged?

    /// No group open.
    @inlinable public init() {}

    /// Traps when a group is open: `judge` checks it before it reads or begins anything.
    @inlinable public func expectNoneOpen() {
        precondition(judged == nil, "GroupCommitter.judge with a group open")
    }

    /// Opens a group, keeping `judged` for its `append`.
    @inlinable public mutating func open(_ judged: Judged) {
        expectNoneOpen()
        self.judged = judged
    }

    /// Closes the open group and returns what its judgement kept.
    @inlinable public mutating func close() -> Judged {
        guard let judged else { preconditionFailure("GroupCommitter.append without judge") }
        self.judged = nil
        return judged
    }

    /// Closes the open group without an append.
    @inlinable public mutating func abandon() {
        precondition(judged != nil, "GroupCommitter.abandon without judge")
        judged = nil
    }

    /// Checks that the series ends with no group open: a group judged and neither appended nor abandoned is a
    /// programming error.
    @inlinable public func finish() {
        precondition(judged == nil, "a series of groups ended with a group open")
    }
}
