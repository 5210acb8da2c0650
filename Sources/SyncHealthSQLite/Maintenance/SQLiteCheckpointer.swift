import GRDB
import SyncHealthStore

/// A second connection to the store's file, which copies committed WAL pages into the database file (a passive
/// checkpoint) while the writer goes on. `SQLiteMaintenance` runs it after each fold of the journal.
///
/// SQLite's own checkpoint runs inside the commit that takes the WAL past 1,000 pages: that commit waited
/// ~10-15 ms for the copy and the database file's fsync. After a passive checkpoint here, that checkpoint finds
/// the pages already copied and only finishes the last few. A passive checkpoint never blocks the writer or readers.
final class SQLiteCheckpointer: Sendable {
    private let connection: DatabaseQueue

    init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        connection = try DatabaseQueue(path: path, configuration: configuration)
    }

    /// One passive checkpoint. Busy means another checkpoint (SQLite's own, in a commit) holds the lock: it does
    /// the work.
    /// After `close()` it does nothing.
    func checkpoint() async {
        _ = try? await connection.writeWithoutTransaction(Self.passive)
    }

    /// `checkpoint()`, run on the calling thread.
    func checkpointBlocking() {
        _ = try? connection.writeWithoutTransaction(Self.passive)
    }

    /// A passive checkpoint on an open connection. The store closes the checkpointer while `SQLiteMaintenance`
    /// may still be running; SQLite's checkpoint call crashes on a closed (nil) connection, and the check here
    /// runs on the connection's queue, after any close that came first.
    private static func passive(_ db: Database) throws {
        guard db.sqliteConnection != nil else { return }
        _ = try db.checkpoint(.passive)
    }

    /// Closes the connection once a running checkpoint ends. Closing twice is harmless.
    func close() {
        try? connection.close()
    }
}
