import GRDB

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
    func checkpoint() async {
        _ = try? await connection.writeWithoutTransaction { db in try db.checkpoint(.passive) }
    }

    /// `checkpoint()`, run on the calling thread.
    func checkpointBlocking() {
        _ = try? connection.writeWithoutTransaction { db in try db.checkpoint(.passive) }
    }

    func close() {
        try? connection.close()
    }
}
