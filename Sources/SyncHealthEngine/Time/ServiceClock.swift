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
    /// An alarm that calls `fire` when a deadline it is set to comes. A wait that a signal may also end
    /// (`WakeSignal`) sets one instead of sleeping in a task of its own: a task group and two tasks for every wait
    /// were a large share of a single event's cost (docs/architecture.md, "The cost of a request").
    func makeAlarm(_ fire: @escaping @Sendable () -> Void) -> any ServiceAlarm
}

/// A one-shot alarm that can be set again: `fire` is called once for each deadline set, when it comes, unless
/// the alarm is set again (or disarmed with `nil`) first. `fire` is never called while the caller of `set` holds
/// the alarm's own lock, so it may take the caller's locks.
public protocol ServiceAlarm: Sendable {
    /// Arms the alarm for `deadline`, replacing whatever it was set to; `nil` disarms it.
    func set(_ deadline: Timestamp?)
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

    public func makeAlarm(_ fire: @escaping @Sendable () -> Void) -> any ServiceAlarm {
        DispatchAlarm(clock: self, fire: fire)
    }
}
