public import SyncHealthCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The service's own clock: the only place the service reads the time. Injected, so tests control time.
public protocol ServiceClock: Sendable {
    /// The current wall-clock time.
    var now: Timestamp { get }
    /// Suspends until `deadline`, or throws `CancellationError` when the task is cancelled.
    func sleep(until deadline: Timestamp) async throws
}

/// The system's real-time clock.
///
/// It sleeps in steps of at most `longestStep`. A cancelled `Task.sleep` keeps its timer and a small task (about
/// 900 bytes) until the deadline it was given (swiftlang/swift#60441). The engine's loop waits until the next
/// device deadline, often hours ahead, and requests wake it early about 80 times a second under load, so a sleep
/// to the deadline itself would leave those bytes behind for hours, a leak under steady load
/// (docs/benchmarks-log.md#where-a-soaks-memory-goes). In steps, what a cancelled sleep keeps is freed within a
/// step.
public struct SystemClock: ServiceClock {
    /// The longest a sleep waits before it looks at the clock again.
    public static let longestStep = Duration.seconds(1)

    /// Creates the clock.
    public init() {}

    public var now: Timestamp {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Timestamp(microseconds: Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000)
    }

    public func sleep(until deadline: Timestamp) async throws {
        while true {
            let wait = deadline - now
            guard wait > .zero else { return }
            try await Task.sleep(for: min(wait, Self.longestStep))
        }
    }
}

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
