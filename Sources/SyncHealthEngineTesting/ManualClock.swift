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
        /// Armed alarms, by id; each counts as a sleeper.
        var alarms: [Int: (deadline: Timestamp, fire: @Sendable () -> Void)] = [:]
        var nextId = 0

        var sleeperCount: Int { sleepers.count + alarms.count }
        /// Tasks waiting for at least `count` sleepers.
        var watchers: [Int: (count: Int, continuation: CheckedContinuation<Void, Never>)] = [:]

        /// Takes the watchers whose count the sleepers reach now.
        mutating func satisfiedWatchers() -> [CheckedContinuation<Void, Never>] {
            let reached = watchers.filter { $0.value.count <= sleeperCount }
            for id in reached.keys { watchers[id] = nil }
            return reached.values.map(\.continuation)
        }
    }

    private let state: Mutex<State>

    /// A clock standing at `start`.
    public init(_ start: Timestamp) {
        state = Mutex(State(now: start))
    }

    public var now: Timestamp { state.withLock { $0.now } }

    /// The number of tasks sleeping on this clock.
    public var sleeperCount: Int { state.withLock { $0.sleeperCount } }

    /// Returns once at least `count` tasks sleep on this clock. After a move of the clock, waiting for as many as
    /// slept before it waits for the loops it woke to have served what came due and to sleep again.
    public func waitForSleepers(_ count: Int) async {
        let id = state.withLock { s -> Int in
            s.nextId += 1
            return s.nextId
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.sleeperCount >= count || Task.isCancelled { return true }
                    s.watchers[id] = (count, continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.watchers.removeValue(forKey: id) }?.continuation.resume()
        }
    }

    /// Moves the clock forward by `duration`, waking every sleeper whose deadline has come.
    public func advance(by duration: Duration) {
        advance(to: now + duration)
    }

    /// Moves the clock to `time` (never backwards), waking every sleeper whose deadline has come.
    public func advance(to time: Timestamp) {
        let (due, alarms) = state.withLock { s -> ([Sleeper], [@Sendable () -> Void]) in
            s.now = max(s.now, time)
            let now = s.now
            let due = s.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { s.sleepers[id] = nil }
            let rung = s.alarms.filter { $0.value.deadline <= now }
            for id in rung.keys { s.alarms[id] = nil }
            return (Array(due.values), rung.values.map(\.fire))
        }
        for sleeper in due { sleeper.continuation.resume() }
        for fire in alarms { fire() }
    }

    public func makeAlarm(_ fire: @escaping @Sendable () -> Void) -> any ServiceAlarm {
        let id = state.withLock { s -> Int in
            s.nextId += 1
            return s.nextId
        }
        return Alarm(clock: self, id: id, fire: fire)
    }

    private struct Alarm: ServiceAlarm {
        let clock: ManualClock
        let id: Int
        let fire: @Sendable () -> Void

        func set(_ deadline: Timestamp?) { clock.set(alarm: self, to: deadline) }
    }

    /// An alarm set for a time that has come rings at once; an armed one counts as a sleeper until it rings.
    private func set(alarm: Alarm, to deadline: Timestamp?) {
        let (ringNow, watchers) = state.withLock { s -> (Bool, [CheckedContinuation<Void, Never>]) in
            s.alarms[alarm.id] = nil
            guard let deadline else { return (false, []) }
            if deadline <= s.now { return (true, []) }
            s.alarms[alarm.id] = (deadline, alarm.fire)
            return (false, s.satisfiedWatchers())
        }
        for watcher in watchers { watcher.resume() }
        if ringNow { alarm.fire() }
    }

    public func sleep(until deadline: Timestamp) async throws {
        let id = state.withLock { s -> Int in
            s.nextId += 1
            return s.nextId
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Start { case due, cancelled, sleeping }
                let (start, watchers) = state.withLock { s -> (Start, [CheckedContinuation<Void, Never>]) in
                    if Task.isCancelled { return (.cancelled, []) }
                    if deadline <= s.now { return (.due, []) }
                    s.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return (.sleeping, s.satisfiedWatchers())
                }
                for watcher in watchers { watcher.resume() }
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
