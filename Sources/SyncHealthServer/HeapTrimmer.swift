import CHeap
public import Logging
public import NIOPosix
public import ServiceLifecycle
import SyncHealthCore

/// Gives the heap's free pages back to the system every `interval` (glibc's `malloc_trim`).
///
/// Ingestion allocates and frees much short-lived memory (request bodies, the commit journal's backlog, a fold's
/// event-id buckets) between long-lived device records. What is freed sits in holes that `free` cannot hand back,
/// so without a trim the RSS stays near its high-water mark long after a burst has passed.
///
/// A trim takes a few milliseconds on a large heap and holds each allocator arena's lock meanwhile, so it runs on
/// NIO's thread pool for blocking work, never on the concurrency pool. Elsewhere than glibc it does nothing.
public struct HeapTrimmer: Service {
    let interval: Duration
    let threadPool: NIOThreadPool
    let trim: @Sendable () -> Bool
    let logger: Logger

    /// A trimmer that trims every `interval` through `trim` (by default glibc's `malloc_trim`), on `threadPool`.
    public init(
        interval: Duration = .seconds(10),
        threadPool: NIOThreadPool = .singleton,
        logger: Logger,
        trim: @escaping @Sendable () -> Bool = HeapTrimmer.trimNow
    ) {
        self.interval = interval
        self.threadPool = threadPool
        self.trim = trim
        self.logger = logger
    }

    public func run() async throws {
        // Graceful shutdown cancels the sleep; a trim that has started finishes first.
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await Task.sleep(for: interval)
                } catch {
                    return
                }
                let started = ContinuousClock.now
                guard let released = try? await threadPool.runIfActive(trim) else { return }
                logger.debug(
                    "Trimmed the heap",
                    metadata: [
                        "heap.released": "\(released)",
                        "heap.trim_us": "\((ContinuousClock.now - started).microseconds)",
                    ]
                )
            }
        }
    }

    /// Gives the free pages of every arena back to the system now; returns whether any were.
    @Sendable public static func trimNow() -> Bool {
        cheap_trim(0) != 0
    }
}
