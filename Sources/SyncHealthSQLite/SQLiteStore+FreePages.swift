import Foundation
import GRDB
import SyncHealthStore

extension SQLiteStore {
    /// The database file's pages, and how many of them are free, as the last commit left them.
    public struct PageCounts: Sendable, Equatable {
        /// Pages in the file.
        public var pages: Int
        /// Pages on the free list: in the file, holding nothing.
        public var free: Int
        /// Bytes a page.
        public var pageSize: Int
        /// Whether the file can return free pages (`auto_vacuum = INCREMENTAL`); stores created before it cannot
        /// until `SQLiteStore.compact(directory:)` has run once.
        public var reclaimable: Bool
    }

    /// Creates an empty database at `path` that can return free pages (`auto_vacuum = INCREMENTAL`), unless a file
    /// is there already. SQLite takes the setting only before the first table and before WAL mode, so this runs
    /// before the pool opens the file.
    static func createReclaimable(_ path: String) throws {
        guard !FileManager.default.fileExists(atPath: path) else { return }
        let queue = try DatabaseQueue(path: path)
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
            try db.execute(sql: "PRAGMA journal_mode = WAL")
        }
        try queue.close()
    }

    /// The file's page counts.
    public func pageCounts() async throws -> PageCounts {
        try await pool.read { db in try Self.pageCounts(db) }
    }

    static func pageCounts(_ db: Database) throws -> PageCounts {
        PageCounts(
            pages: try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0,
            free: try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0,
            pageSize: try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 0,
            reclaimable: try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") == 2
        )
    }

    /// Returns up to `pages` free pages to the file system (`PRAGMA incremental_vacuum`), on the calling thread:
    /// the writer moves pages from the file's end into free slots; the file shrinks at the next checkpoint.
    /// Returns the free pages left. Does nothing to a store that cannot return pages.
    @discardableResult
    func reclaimFreePagesBlocking(_ pages: Int) throws -> Int {
        try pool.writeWithoutTransaction { db in
            // A count, not a value from outside: PRAGMA takes no bound arguments.
            try db.execute(sql: "PRAGMA incremental_vacuum(\(max(0, pages)))")
            return try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
        }
    }

    /// Rewrites the store in `directory`, for a service that is stopped, so that it can return free pages and holds
    /// none: its journal is written into the tables, then `VACUUM` with `auto_vacuum = INCREMENTAL`. Needed once for
    /// a store created by a release before free pages were returned; it takes about as long as a backup, and needs
    /// as much free disk as the file. Returns the file's page counts before and after.
    public static func compact(directory: String) async throws -> (before: PageCounts, after: PageCounts) {
        let store = try SQLiteStore(directory: directory)
        do {
            try await store.fold()
            let counts = try await store.pool.writeWithoutTransaction { db in
                let before = try pageCounts(db)
                try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
                try db.execute(sql: "VACUUM")
                return (before, try pageCounts(db))
            }
            try await store.close()
            return counts
        } catch {
            try? await store.close()
            throw error
        }
    }
}
