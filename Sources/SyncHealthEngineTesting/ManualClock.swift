public import SyncHealthCore
public import SyncHealthEngine
import Synchronization

/// A clock that moves only when told to: for tests of timers and deadlines.
public final class ManualClock: ServiceClock {
    private struct Sleeper {
        let deadline: Timestamp
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: Timestamp
        var sleepers: [Int: Sleeper] = [:]
        var nextId = 0
    }

    private let state: Mutex<State>

    /// A clock standing at `start`.
    public init(_ start: Timestamp) {
        state = Mutex(State(now: start))
    }

    public var now: Timestamp { state.withLock { $0.now } }

    /// The number of tasks sleeping on this clock.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// Moves the clock forward by `duration`, waking every sleeper whose deadline has come.
    public func advance(by duration: Duration) {
        advance(to: now + duration)
    }

    /// Moves the clock to `time` (never backwards), waking every sleeper whose deadline has come.
    public func advance(to time: Timestamp) {
        let due = state.withLock { s -> [Sleeper] in
            s.now = max(s.now, time)
            let now = s.now
            let due = s.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { s.sleepers[id] = nil }
            return Array(due.values)
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    public func sleep(until deadline: Timestamp) async throws {
        let id = state.withLock { s -> Int in
            s.nextId += 1
            return s.nextId
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Start { case due, cancelled, sleeping }
                let start = state.withLock { s -> Start in
                    if Task.isCancelled { return .cancelled }
                    if deadline <= s.now { return .due }
                    s.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return .sleeping
                }
                switch start {
                case .due: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .sleeping: break
                }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }
}
