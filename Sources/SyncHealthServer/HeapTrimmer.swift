import CHeap
public import Logging
public import NIOPosix
public import ServiceLifecycle
import SyncHealthCore

/// Gives the heap's free pages back to the system (glibc's `malloc_trim`) when `HeapTrimPolicy` says so.
///
/// Ingestion allocates and frees much short-lived memory (request bodies, the commit journal's backlog, a fold's
/// event-id buckets) between long-lived device records. What is freed sits in holes that `free` cannot hand back,
/// so without a trim the RSS stays near its high-water mark long after a burst has passed.
///
/// Every `interval` the trimmer reads the process's CPU time and resident set (cheap: a clock and a small file)
/// and asks the policy. A trim runs on NIO's thread pool for blocking work, never on the concurrency pool.
/// Elsewhere than glibc on Linux it never trims.
public struct HeapTrimmer: Service {
    let interval: Duration
    let policy: HeapTrimPolicy
    let threadPool: NIOThreadPool
    let read: @Sendable () -> HeapTrimPolicy.Reading?
    let trim: @Sendable () -> Bool
    let logger: Logger

    /// A trimmer that reads the process every `interval` through `read` and trims through `trim` (by default
    /// glibc's `malloc_trim`) on `threadPool`, when `policy` says so.
    public init(
        interval: Duration = .seconds(1),
        policy: HeapTrimPolicy = HeapTrimPolicy(),
        threadPool: NIOThreadPool = .singleton,
        logger: Logger,
        read: @escaping @Sendable () -> HeapTrimPolicy.Reading? = HeapTrimmer.readNow,
        trim: @escaping @Sendable () -> Bool = HeapTrimmer.trimNow
    ) {
        self.interval = interval
        self.policy = policy
        self.threadPool = threadPool
        self.read = read
        self.trim = trim
        self.logger = logger
    }

    public func run() async throws {
        // Graceful shutdown cancels the sleep; a trim that has started finishes first.
        await cancelWhenGracefulShutdown {
            var policy = self.policy
            while !Task.isCancelled {
                do {
                    try await Task.sleep(for: interval)
                } catch {
                    return
                }
                guard let before = read(), policy.shouldTrim(after: before) else { continue }
                let started = ContinuousClock.now
                guard let released = try? await threadPool.runIfActive(trim) else { return }
                let took = ContinuousClock.now - started
                let after = read() ?? before
                policy.trimmed(leaving: after.resident, at: after.at)
                logger.debug(
                    "Trimmed the heap",
                    metadata: [
                        "heap.released": "\(released)",
                        "heap.resident_before": "\(before.resident)",
                        "heap.resident_after": "\(after.resident)",
                        "heap.trim_us": "\(took.microseconds)",
                    ]
                )
            }
        }
    }

    /// Gives the free pages of every arena back to the system now; returns whether any were.
    @Sendable public static func trimNow() -> Bool {
        cheap_trim(0) != 0
    }

    /// This process's CPU time and resident set now; nil where the system does not tell them.
    @Sendable public static func readNow() -> HeapTrimPolicy.Reading? {
        let cpu = cheap_cpu_nanoseconds()
        let resident = cheap_resident_bytes()
        guard cpu >= 0, resident >= 0 else { return nil }
        return HeapTrimPolicy.Reading(at: .now, cpu: .nanoseconds(cpu), resident: Int(resident))
    }
}
