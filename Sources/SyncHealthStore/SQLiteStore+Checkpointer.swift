import GRDB
import ServiceLifecycle

/// Copies committed WAL pages into the database file on a second connection, right after each commit, while
/// the writer goes on with the next group.
///
/// SQLite's own checkpoint runs inside the commit that takes the WAL past 1,000 pages: that commit, and every
/// request waiting on it, waited ~10-15 ms for the copy and the database file's fsync. With this service running,
/// that checkpoint finds the pages already copied and only finishes the last few; SQLite then restarts the WAL
/// from its beginning as before. A passive checkpoint never blocks the writer or readers. Run it in the
/// service group (`SQLiteStore.checkpointer`); without it the store works the same, with the stalls.
public final class SQLiteCheckpointer: Service, Sendable {
    private let connection: DatabaseQueue
    private let signals: AsyncStream<Void>
    private let signalContinuation: AsyncStream<Void>.Continuation

    init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        connection = try DatabaseQueue(path: path, configuration: configuration)
        // Commits that land while a checkpoint runs are served by one more pass, not one each.
        (signals, signalContinuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Asks for a pass after a commit.
    func signal() {
        signalContinuation.yield()
    }

    /// Checkpoints after each signalled commit until graceful shutdown or cancellation. In the service group it
    /// comes before the engine, so it stops after the engine has committed its last group and closed the store.
    public func run() async throws {
        for await _ in signals.cancelOnGracefulShutdown() {
            // Busy means another checkpoint (SQLite's own, in a commit) holds the lock: it does the work.
            _ = try? await connection.writeWithoutTransaction { db in try db.checkpoint(.passive) }
        }
        try? connection.close()
    }
}
