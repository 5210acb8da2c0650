import Foundation
import GRDB
import NIOPosix
public import SyncHealthStore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension SQLiteStore: StoreBackup {
    /// The data directory.
    public var backupDirectory: String { (path as NSString).deletingLastPathComponent }

    /// Folds the journal, so that every group appended before the call is in the tables, then writes a compact copy
    /// of the database with `VACUUM INTO` from a read-only connection of its own: a snapshot of one read
    /// transaction, taken while commits go on (they append to the journal; folds wait for no reader in WAL mode).
    ///
    /// The copy runs on a thread of its own at the maintenance service's lower priority, held by a `BackupPacer`
    /// to a tenth of one core, so that ingestion keeps its rate while a copy of 1M devices (~400 MB) is made.
    public func backup(to path: String) async throws {
        let pace = backupPace.withLock { $0 }
        try await backup(to: path, work: pace.work, pause: pace.pause)
    }

    /// `backup(to:)` paced to `work` out of every `work + pause` (no pause: flat out); returns the pauses taken.
    ///
    /// Cancelling the calling task stops the copy within a few thousand of SQLite's steps (the client went away: a
    /// copy of 1M devices is minutes of a tenth of a core that nobody would read), deletes what it wrote, and throws
    /// `CancellationError`.
    @discardableResult
    func backup(to path: String, work: Duration, pause: Duration) async throws -> Int {
        try await flushCounters()
        try await fold()
        // The copy holds webhook secrets: created for its owner alone, then filled (`VACUUM INTO` takes an empty file).
        let created = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if created >= 0 { closeDescriptor(created) }
        let source = self.path
        let stop = BackupPacer.Stop()
        let thread = NIOThreadPool(numberOfThreads: 1)
        thread.start()
        defer { thread.shutdownGracefully { _ in } }
        do {
            return try await withTaskCancellationHandler {
                try await thread.runIfActive {
                    lowerCallingThreadPriority(by: SQLiteMaintenance.defaultNiceness)
                    let pacer = BackupPacer(work: work, pause: pause, stop: stop)
                    var configuration = Configuration()
                    configuration.readonly = true
                    let reader = try DatabaseQueue(path: source, configuration: configuration)
                    defer { try? reader.close() }
                    try reader.inDatabase { db in
                        // The copy can return free pages whatever the store's setting: restoring it converts a
                        // store made before stores could (see `SQLiteStore.compact`). Only asked of a store that
                        // cannot: on one that can, the pragma writes its header, which a read-only connection
                        // refuses.
                        if try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") != 2 {
                            try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
                        }
                        try pacer.during(db) { try db.execute(sql: "VACUUM INTO ?", arguments: [path]) }
                    }
                    return pacer.pauses
                }
            } onCancel: {
                stop.request()
            }
        } catch {
            guard stop.requested else { throw error }
            unlink(path)
            throw CancellationError()
        }
    }

    /// Makes the database at `path` and its WAL and shared-memory files, where they exist, readable and writable
    /// by their owner alone: they hold webhook secrets, Slack webhook URLs and PagerDuty routing keys. SQLite gives
    /// the WAL and shared-memory files it creates the database's permissions.
    static func restrictToOwner(_ path: String) {
        for file in [path, path + "-wal", path + "-shm"] { _ = chmod(file, 0o600) }
    }

    /// What a checked backup holds.
    public struct BackupContents: Sendable, Equatable {
        /// Devices in it.
        public var devices: Int
        /// The last schema migration it has.
        public var schema: String
    }

    /// Checks that `path` is a backup this build can open: SQLite's header, `PRAGMA integrity_check`, and
    /// migrations that are all this build's (none newer). Opens it read-only; changes nothing.
    public static func checkBackup(at path: String) throws(StoreError) -> BackupContents {
        guard FileManager.default.fileExists(atPath: path) else { throw .unavailable(path: path, reason: "no such file") }
        do {
            try checkHeader(path)
            var configuration = Configuration()
            configuration.readonly = true
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? queue.close() }
            return try queue.read { db throws -> BackupContents in
                let check = try String.fetchAll(db, sql: "PRAGMA integrity_check")
                guard check == ["ok"] else { throw StoreError.corrupt(path: path, reason: check.prefix(3).joined(separator: "; ")) }
                let known = migrator.migrations
                let applied = try migrator.appliedMigrations(db)
                guard let last = applied.last, Set(applied).isSubset(of: known) else {
                    throw applied.isEmpty
                        ? StoreError.corrupt(path: path, reason: "it is not a synchealth store")
                        : StoreError.newerSchema(path: path)
                }
                let devices = try Int.fetchOne(db, sql: "SELECT count(*) FROM devices") ?? 0
                return BackupContents(devices: devices, schema: last)
            }
        } catch let error as StoreError {
            throw error
        } catch let error as DatabaseError {
            throw .corrupt(path: path, reason: error.message ?? "\(error.resultCode)")
        } catch {
            throw .unavailable(path: path, reason: "\(error)")
        }
    }

    /// Installs a backup as the store of `directory`, for a service that is stopped. Checks the backup first, and
    /// refuses a directory in use by a running server, or holding a store or journal of its own: nothing in
    /// `directory` changes unless the backup is installed whole (copied beside, synced, then renamed into place).
    public static func restore(backup: String, into directory: String) throws(StoreError) -> BackupContents {
        let contents = try checkBackup(at: backup)
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw .unavailable(path: directory, reason: "cannot create it (\(error.localizedDescription))")
        }
        let lock: Int32
        do {
            lock = try lockDirectory(directory)
        } catch let error as StoreError {
            throw error
        } catch {
            throw .unavailable(path: directory, reason: "\(error)")
        }
        defer { closeDescriptor(lock) }
        let database = (directory as NSString).appendingPathComponent("synchealth.sqlite")
        let existing = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter {
            $0.hasPrefix("synchealth.sqlite") || $0.hasPrefix("synchealth-journal-")
        }
        guard existing.isEmpty else {
            throw .unavailable(
                path: directory,
                reason: "it holds a store already (\(existing.sorted().joined(separator: ", "))); move them away first"
            )
        }
        let partial = database + ".restoring"
        do {
            try? FileManager.default.removeItem(atPath: partial)
            try FileManager.default.copyItem(atPath: backup, toPath: partial)
            restrictToOwner(partial)
            let handle = try FileHandle(forUpdating: URL(fileURLWithPath: partial))
            try handle.synchronize()
            try handle.close()
        } catch {
            try? FileManager.default.removeItem(atPath: partial)
            throw .unavailable(path: directory, reason: "cannot copy the backup in (\(error.localizedDescription))")
        }
        guard rename(partial, database) == 0 else {
            try? FileManager.default.removeItem(atPath: partial)
            throw .unavailable(path: directory, reason: "cannot move the backup into place (\(String(cString: strerror(errno))))")
        }
        return contents
    }
}
