import Synchronization

/// Writes App Attest counter moves in groups: a caller that finds no write under way leads, writing its own move and
/// every move queued meanwhile in one transaction, until nothing is queued; the others wait for their answers. A
/// transaction of its own for each signed upload would cost an fsync each (the tables' `synchronous` is `full`), where
/// the uploads themselves share the journal's group commits; grouped, a busy second costs a few fsyncs, as the
/// journal does. The leader writes in its own task: no task is started here.
final class CounterGroupCommit<Move: Sendable>: Sendable {
    /// `nil`: the write under way ended before the caller was queued; it tries to lead.
    typealias Waiter = CheckedContinuation<Bool?, any Error>

    private struct State {
        var queued: [(move: Move, waiter: Waiter)] = []
        var writing = false
    }

    private let state = Mutex(State())
    /// Writes one group in one transaction; returns one answer a move, in order.
    private let write: @Sendable ([Move]) async throws -> [Bool]

    init(write: @escaping @Sendable ([Move]) async throws -> [Bool]) {
        self.write = write
    }

    /// Writes `move`, with whatever else is queued, and returns its answer.
    func submit(_ move: Move) async throws -> Bool {
        while true {
            let leads = state.withLock { s -> Bool in
                guard !s.writing else { return false }
                s.writing = true
                return true
            }
            if leads { return try await lead(move) }
            let answer = try await withCheckedThrowingContinuation { (waiter: Waiter) in
                let queued = state.withLock { s -> Bool in
                    guard s.writing else { return false }
                    s.queued.append((move, waiter))
                    return true
                }
                if !queued { waiter.resume(returning: nil) }
            }
            if let answer { return answer }
        }
    }

    /// Writes the leader's move with the queue, then each group queued during the write before, until none is.
    private func lead(_ move: Move) async throws -> Bool {
        var own: Result<Bool, any Error>?
        var pending: [(move: Move, waiter: Waiter?)] = [(move, nil)] + take(endingIfEmpty: false).map { ($0.move, $0.waiter) }
        while !pending.isEmpty {
            do {
                let answers = try await write(pending.map(\.move))
                for (index, entry) in pending.enumerated() {
                    let answer = index < answers.count && answers[index]
                    if let waiter = entry.waiter { waiter.resume(returning: answer) } else { own = .success(answer) }
                }
            } catch {
                for entry in pending {
                    if let waiter = entry.waiter { waiter.resume(throwing: error) } else { own = .failure(error) }
                }
            }
            pending = take(endingIfEmpty: true).map { ($0.move, $0.waiter) }
        }
        return try (own ?? .success(false)).get()
    }

    /// What is queued; when nothing is and `endingIfEmpty`, the write under way ends (in the same lock, so no one is
    /// left queued behind it).
    private func take(endingIfEmpty: Bool) -> [(move: Move, waiter: Waiter)] {
        state.withLock { s in
            let group = s.queued
            s.queued.removeAll(keepingCapacity: true)
            if group.isEmpty, endingIfEmpty { s.writing = false }
            return group
        }
    }
}
