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
