import CHeap
public import Logging
public import Metrics
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
///
/// After each trim at rest it also measures the heap (`HeapUsage`) into two gauges: what is allocated, and what
/// the allocator holds free. Under steady load the resident set grows for minutes while what is allocated stays
/// level: freed memory stays in the arenas, in pieces among long-lived allocations, where a trim cannot return
/// it (docs/benchmarks-log.md#where-a-soaks-memory-goes). The gauges tell that apart from a leak.
public struct HeapTrimmer: Service {
    let interval: Duration
    let policy: HeapTrimPolicy
    let threadPool: NIOThreadPool
    let read: @Sendable () -> HeapTrimPolicy.Reading?
    let trim: @Sendable () -> Bool
    let measure: @Sendable () -> HeapUsage?
    let inUse: Gauge
    let free: Gauge
    let logger: Logger

    /// A trimmer that reads the process every `interval` through `read` and trims through `trim` (by default
    /// glibc's `malloc_trim`) on `threadPool`, when `policy` says so; after a trim at rest it records `measure`
    /// in gauges made by `metrics`.
    public init(
        interval: Duration = .seconds(1),
        policy: HeapTrimPolicy = HeapTrimPolicy(),
        threadPool: NIOThreadPool = .singleton,
        logger: Logger,
        metrics: any MetricsFactory = MetricsSystem.factory,
        read: @escaping @Sendable () -> HeapTrimPolicy.Reading? = HeapTrimmer.readNow,
        trim: @escaping @Sendable () -> Bool = HeapTrimmer.trimNow,
        measure: @escaping @Sendable () -> HeapUsage? = HeapTrimmer.measureNow
    ) {
        self.interval = interval
        self.policy = policy
        self.threadPool = threadPool
        self.read = read
        self.trim = trim
        self.measure = measure
        self.inUse = Gauge(label: "synchealth_heap_in_use_bytes", factory: metrics)
        self.free = Gauge(label: "synchealth_heap_free_bytes", factory: metrics)
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
                guard let before = read(), let kind = policy.shouldTrim(after: before) else { continue }
                let started = ContinuousClock.now
                guard let released = try? await threadPool.runIfActive(trim) else { return }
                let took = ContinuousClock.now - started
                let after = read() ?? before
                policy.trimmed(leaving: after.resident, at: after.at)
                var metadata: Logger.Metadata = [
                    "heap.released": "\(released)",
                    "heap.resident_before": "\(before.resident)",
                    "heap.resident_after": "\(after.resident)",
                    "heap.trim_us": "\(took.microseconds)",
                ]
                if kind == .atRest, let usage = try? await threadPool.runIfActive(measure) {
                    inUse.record(usage.inUse)
                    free.record(usage.free)
                    metadata["heap.in_use"] = "\(usage.inUse)"
                    metadata["heap.free"] = "\(usage.free)"
                }
                logger.debug("Trimmed the heap", metadata: metadata)
            }
        }
    }

    /// Gives the free pages of every arena back to the system now; returns whether any were.
    @Sendable public static func trimNow() -> Bool {
        cheap_trim(0) != 0
    }

    /// What the allocator holds now; nil where the C library does not tell. Holds each arena's lock while it walks
    /// its free lists (6-20 ms with 100,000 devices), so it is only run at rest.
    @Sendable public static func measureNow() -> HeapUsage? {
        var inUse: Int64 = 0
        var free: Int64 = 0
        guard cheap_heap_usage(&inUse, &free) == 0 else { return nil }
        return HeapUsage(inUse: Int(inUse), free: Int(free))
    }

    /// This process's CPU time and resident set now; nil where the system does not tell them.
    @Sendable public static func readNow() -> HeapTrimPolicy.Reading? {
        let cpu = cheap_cpu_nanoseconds()
        let resident = cheap_resident_bytes()
        guard cpu >= 0, resident >= 0 else { return nil }
        return HeapTrimPolicy.Reading(at: .now, cpu: .nanoseconds(cpu), resident: Int(resident))
    }
}

/// What the allocator holds, in bytes.
public struct HeapUsage: Sendable, Equatable {
    /// Allocated and not yet freed, the large blocks mapped on their own included.
    public var inUse: Int
    /// Free inside the allocator's arenas, resident or not: what it keeps for later allocations.
    public var free: Int

    /// A measurement of `inUse` bytes allocated and `free` bytes free in the arenas.
    public init(inUse: Int, free: Int) {
        self.inUse = inUse
        self.free = free
    }
}
