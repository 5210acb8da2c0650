import Foundation
import GRDB
import SyncHealthStore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// What opening a store checks and takes before it serves: the directory's lock, the file's header, SQLite's
// quick check, and the journal's records not yet in the tables.
extension SQLiteStore {
    /// SQLite's quick check of every table and its indexes but `event_ids`, which holds most of a store's pages
    /// once its window has filled, so that a start does not read the whole window (docs/architecture.md#event-ids-by-generation).
    /// A damaged page there fails the fold that reaches it, which keeps its groups in the journal; the backup's full
    /// integrity check covers it.
    static func quickCheck(_ db: Database, path: String) throws {
        let tables = try String.fetchAll(
            db,
            sql: "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'event_ids'"
        )
        // A table's name is not a value: PRAGMA takes it quoted, as an identifier, not bound.
        for table in ["sqlite_schema"] + tables {
            let check = try String.fetchOne(db, sql: "PRAGMA quick_check(\"\(table.replacingOccurrences(of: "\"", with: "\"\""))\")") ?? "no answer"
            if check != "ok" { throw StoreError.corrupt(path: path, reason: check) }
        }
    }

    /// Takes an exclusive, non-blocking lock on `directory/synchealth.lock`, released when the store closes or
    /// the process dies. The descriptor is close-on-exec: a `flock` belongs to the open file, so a child process
    /// that inherited it would hold the directory after this store closed.
    static func lockDirectory(_ directory: String) throws -> Int32 {
        let lockPath = (directory as NSString).appendingPathComponent("synchealth.lock")
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError.unavailable(path: directory, reason: "cannot open \(lockPath)") }
        // Close-on-exec still leaves a window: a child forked by another thread holds the open file from its fork to
        // its exec. A store closed and reopened in that window (a restart in-process, a test) would be refused
        // for a lock nobody wants, so a held lock is tried again for a while before it counts as another server's.
        var attempts = 0
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            attempts += 1
            guard attempts < lockAttempts else {
                closeDescriptor(fd)
                throw StoreError.locked(path: directory)
            }
            usleep(lockRetryMicroseconds)
        }
        return fd
    }

    /// How often, and how far apart, `lockDirectory` tries a held lock: half a second in all.
    static let lockAttempts = 25
    static let lockRetryMicroseconds: UInt32 = 20_000

    /// Refuses a file that exists but does not start with SQLite's header, before SQLite gets to touch it.
    static func checkHeader(_ path: String) throws {
        guard let handle = FileHandle(forReadingAtPath: path) else { return }
        defer { try? handle.close() }
        let header = (try? handle.read(upToCount: 16)) ?? Data()
        if header.isEmpty { return }
        if header != Data("SQLite format 3\0".utf8) {
            throw StoreError.corrupt(path: path, reason: "the file does not start with the SQLite header")
        }
    }

    /// Writes what the journal in `directory` holds beyond the tables into them, retires its segments, and opens
    /// the journal for the next commits.
    static func recoverJournal(directory: String, pool: DatabasePool, durable: Bool, eventIdSpan: Int64, io: JournalIO) throws -> CommitJournal {
        let contents = try CommitJournal.read(directory: directory)
        let folded = try pool.read { db in try Int64.fetchOne(db, sql: "SELECT folded_through FROM journal_state") ?? 0 }
        let entries = try contents.records.filter { $0.seq > folded }.map { record in
            do {
                return try JournalEntry(seq: record.seq, payload: record.payload)
            } catch {
                throw StoreError.corrupt(path: directory, reason: "journal record \(record.seq) checks out but cannot be decoded")
            }
        }
        if let last = entries.last?.seq {
            try pool.write { db in
                try JournalEntry.write(entries, eventIdSpan: eventIdSpan, db)
                try db.execute(sql: "UPDATE journal_state SET folded_through = ?", arguments: [last])
            }
        }
        let journal = CommitJournal(
            directory: directory,
            durable: durable,
            lastNumber: contents.segments.last ?? 0,
            lastSeq: max(folded, contents.lastSeq),
            io: io
        )
        journal.retire(contents.segments)
        return journal
    }
}

/// Closes a file descriptor (the store's own `close()` shadows the C function).
func closeDescriptor(_ fd: Int32) {
    _ = close(fd)
}
