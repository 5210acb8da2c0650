#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import GRDB
import GRDBSQLite
import SyncHealthCore

/// The embedded default store: one SQLite database in WAL mode, through GRDB.
///
/// The data directory is locked for the life of the store, so that two servers never share it.
public final class SQLiteStore: SyncStore {
    /// How hard SQLite works to make a commit durable.
    public enum Synchronous: String, Sendable, CaseIterable {
        /// Survives a crash of the process; a power loss may roll back the last commits.
        case normal = "NORMAL"
        /// Survives a power loss too: every commit is on disk before it returns.
        case full = "FULL"
    }

    /// The database file's path.
    public let path: String
    let pool: DatabasePool
    /// The background checkpointer over this store's file; run it in the service group.
    public let checkpointer: SQLiteCheckpointer
    private let lockDescriptor: Int32

    /// Opens (creating if needed) the store in `directory`.
    ///
    /// - Throws: `StoreError` with a message for the operator when the directory is locked by another server,
    ///   the database is corrupt, or it was written by a newer schema.
    public init(directory: String, synchronous: Synchronous = .full) throws {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw StoreError.unavailable(path: directory, reason: "cannot create it (\(error.localizedDescription))")
        }
        lockDescriptor = try Self.lockDirectory(directory)
        path = (directory as NSString).appendingPathComponent("synchealth.sqlite")
        do {
            try Self.checkHeader(path)
            var configuration = Configuration()
            configuration.busyMode = .timeout(5)
            pool = try DatabasePool(path: path, configuration: configuration)
            // Only the writer commits, so only its setting matters. It is set after the pool is open: opening a
            // pool switches to WAL mode and sets `synchronous = NORMAL`, over anything `prepareDatabase` set.
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = \(synchronous.rawValue)")
            }
            let migrator = Self.migrator
            let path = self.path
            try pool.read { db in
                if try migrator.hasBeenSuperseded(db) { throw StoreError.newerSchema(path: path) }
            }
            try pool.writeWithoutTransaction { db in
                let check = try String.fetchOne(db, sql: "PRAGMA quick_check") ?? "no answer"
                if check != "ok" { throw StoreError.corrupt(path: path, reason: check) }
            }
            try migrator.migrate(pool)
            checkpointer = try SQLiteCheckpointer(path: path)
        } catch let error as StoreError {
            closeDescriptor(lockDescriptor)
            throw error
        } catch let error as DatabaseError where [.SQLITE_NOTADB, .SQLITE_CORRUPT].contains(error.resultCode) {
            closeDescriptor(lockDescriptor)
            throw StoreError.corrupt(path: path, reason: error.message ?? "not a database")
        } catch {
            closeDescriptor(lockDescriptor)
            throw StoreError.unavailable(path: directory, reason: "\(error)")
        }
    }

    /// Takes an exclusive, non-blocking lock on `directory/synchealth.lock`, released when the store closes or
    /// the process dies. The descriptor is close-on-exec: a `flock` belongs to the open file, so a child process
    /// that inherited it would hold the directory after this store closed.
    static func lockDirectory(_ directory: String) throws -> Int32 {
        let lockPath = (directory as NSString).appendingPathComponent("synchealth.lock")
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError.unavailable(path: directory, reason: "cannot open \(lockPath)") }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            closeDescriptor(fd)
            throw StoreError.locked(path: directory)
        }
        return fd
    }

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

    public func loadState() async throws -> PersistedState {
        try await pool.read { db in
            var devices: [DeviceRecord] = []
            let rows = try Row.fetchCursor(db, sql: "SELECT app_id, device_id, state FROM devices ORDER BY seq")
            while let row = try rows.next() {
                let key = DeviceKey(appId: row[0], deviceId: row[1])
                let blob: Data = row[2]
                do {
                    devices.append(try DeviceRecord(key: key, binary: [UInt8](blob)))
                } catch {
                    throw StoreError.undecodableRecord("device \(key)")
                }
            }
            var fleet: [String: Timestamp] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT container_id, starts_at FROM fleet_alerts") {
                fleet[row[0]] = Timestamp(microseconds: row[1])
            }
            return PersistedState(devices: devices, fleetAlerts: fleet)
        }
    }

    public func seenEventIds(_ requests: [(key: DeviceKey, eventIds: [String])]) async throws -> [Set<String>] {
        let requests = requests.map { (hash: $0.key.stableHash, ids: $0.eventIds) }
        return try await pool.read { db in
            try requests.map { request in
                guard !request.ids.isEmpty else { return [] }
                var seen = Set<String>()
                // Chunks stay far below SQLite's bound-variable limit.
                for start in stride(from: 0, to: request.ids.count, by: 500) {
                    let chunk = Array(request.ids[start..<min(start + 500, request.ids.count)])
                    let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                    let statement = try db.cachedStatement(sql: "SELECT event_id FROM seen_events WHERE device_hash = ? AND event_id IN (\(marks))")
                    let arguments = StatementArguments([request.hash] + chunk as [any DatabaseValueConvertible])
                    for id in try String.fetchAll(statement, arguments: arguments) { seen.insert(id) }
                }
                return seen
            }
        }
    }

    public func commit(_ changes: StoreChanges) async throws {
        if changes.isEmpty { return }
        let rows = Rows(changes)
        try await pool.write { db in try rows.write(db) }
        checkpointer.signal()
    }

    /// Records the claimed ids, plans and writes in one transaction on the writer: one B-tree descent per id
    /// (the insert tells whether it was there), and no separate read on a reader connection.
    public func commit<Result: Sendable>(claiming claims: [(key: DeviceKey, eventIds: [String])], at recordedAt: Timestamp,
                                         plan: @escaping @Sendable (_ seen: [Set<String>]) throws -> (changes: StoreChanges, result: Result))
        async throws -> Result {
        let claims = claims.map { (hash: $0.key.stableHash, ids: $0.eventIds) }
        defer { checkpointer.signal() }
        return try await pool.write { db in
            let insert = try FastStatement(db, Rows.insertEventId)
            // An insert that finds its id means "recorded before", unless this group recorded it: the index of
            // this group's ids is built only when the first such insert happens (a retry), not on the common path.
            var inserted: [[Bool]] = []
            var recordedNow: [Int64: Set<String>]?
            var seen: [Set<String>] = []
            var logged: [(hash: Int64, id: String)] = []
            inserted.reserveCapacity(claims.count)
            seen.reserveCapacity(claims.count)
            for (c, claim) in claims.enumerated() {
                var before = Set<String>()
                var flags: [Bool] = []
                flags.reserveCapacity(claim.ids.count)
                for id in claim.ids {
                    let new = try insert.run(.int(claim.hash), .text(id), .int(recordedAt.microseconds)) > 0
                    if new {
                        recordedNow?[claim.hash, default: []].insert(id)
                        logged.append((claim.hash, id))
                    } else {
                        if recordedNow == nil {
                            recordedNow = Self.recorded(by: claims, upTo: c, inserted: inserted, current: flags, of: claim.ids)
                        }
                        if recordedNow?[claim.hash]?.contains(id) != true { before.insert(id) }
                    }
                    flags.append(new)
                }
                inserted.append(flags)
                seen.append(before)
            }
            try EventIdLog.append(logged, recordedAt: recordedAt.microseconds, db)
            var (changes, result) = try plan(seen)
            changes.eventIds = []
            try Rows(changes).write(db)
            return result
        }
    }

    /// The ids this group has recorded so far, by device hash: claims before `upTo`, then the current one's
    /// first `current.count` ids.
    static func recorded(by claims: [(hash: Int64, ids: [String])], upTo c: Int, inserted: [[Bool]], current: [Bool],
                         of ids: [String]) -> [Int64: Set<String>] {
        var index: [Int64: Set<String>] = [:]
        for (claim, flags) in zip(claims.prefix(c), inserted) {
            for (id, new) in zip(claim.ids, flags) where new { index[claim.hash, default: []].insert(id) }
        }
        for (id, new) in zip(ids, current) where new { index[claims[c].hash, default: []].insert(id) }
        return index
    }

    public func alerts(_ query: AlertQuery) async throws -> AlertPage {
        try await pool.read { db in
            var conditions: [String] = []
            var arguments: [any DatabaseValueConvertible] = []
            if let cursor = query.cursor { conditions.append("seq < ?"); arguments.append(cursor) }
            if let state = query.state { conditions.append("state = ?"); arguments.append(state.rawValue) }
            if let kind = query.kind { conditions.append("kind = ?"); arguments.append(kind.rawValue) }
            if let appId = query.appId { conditions.append("app_id = ?"); arguments.append(appId) }
            if let deviceId = query.deviceId { conditions.append("device_id = ?"); arguments.append(deviceId) }
            let whereClause = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
            arguments.append(query.limit + 1)
            let rows = try Row.fetchAll(db, sql: """
                SELECT seq, id, kind, state, app_id, device_id, container_id, starts_at, ends_at, summary, detail
                FROM alerts \(whereClause) ORDER BY seq DESC LIMIT ?
                """, arguments: StatementArguments(arguments))
            var alerts: [AlertRecord] = []
            for row in rows.prefix(query.limit) {
                guard let kind = AlertKind(rawValue: row[2]), let state = AlertState(rawValue: row[3]) else {
                    throw StoreError.undecodableRecord("alert \(String(describing: row[1] as String?))")
                }
                alerts.append(AlertRecord(id: row[1], kind: kind, state: state, deviceId: row[5], appId: row[4], containerId: row[6],
                                          startsAt: Timestamp(microseconds: row[7]), endsAt: (row[8] as Int64?).map(Timestamp.init(microseconds:)),
                                          summary: row[9], detail: row[10]))
            }
            let next: Int64? = rows.count > query.limit ? rows[query.limit - 1][0] : nil
            return AlertPage(alerts: alerts, nextCursor: next)
        }
    }

    public func pruneEventIds(recordedBefore cutoff: Timestamp, limit: Int) async throws -> Int {
        try await pool.write { db in try EventIdLog.prune(recordedBefore: cutoff.microseconds, limit: limit, db) }
    }

    /// The writer connection's `PRAGMA synchronous`, as SQLite reports it: 1 is NORMAL, 2 is FULL.
    func effectiveSynchronous() async throws -> Int {
        try await pool.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
    }

    public func close() async throws {
        // The directory is released whatever happens below: the store is done with it.
        defer { closeDescriptor(lockDescriptor) }
        // Fold the WAL back into the main file, so that a stopped server leaves one self-contained file. If
        // that fails, the WAL stays beside it and the next open replays it: nothing committed is lost.
        // The checkpointer may be running a pass for the last commit: SQLite then answers busy at once, without
        // waiting, so wait here (a pass takes milliseconds).
        var checkpointError: (any Error)?
        var busyAttempts = 0
        while true {
            do {
                _ = try await pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
                break
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY && busyAttempts < 100 {
                busyAttempts += 1
                try? await Task.sleep(for: .milliseconds(10))
            } catch {
                checkpointError = error
                break
            }
        }
        try pool.close()
        if let checkpointError { throw checkpointError }
    }
}

/// Closes a file descriptor (the store's own `close()` shadows the C function).
private func closeDescriptor(_ fd: Int32) {
    _ = close(fd)
}

/// One group's rows, encoded for SQLite.
private struct Rows: Sendable {
    var devices: [(appId: String, deviceId: String, state: [UInt8])]
    var ids: [(hash: Int64, id: String)]
    var alerts: [AlertRecord]
    var fleet: [(containerId: String, startsAt: Timestamp?)]
    var outbox: [OutboxMessage]
    var recordedAt: Int64

    init(_ changes: StoreChanges) {
        devices = changes.devices.map { (appId: $0.key.appId, deviceId: $0.key.deviceId, state: $0.binaryEncoded()) }
        ids = changes.eventIds.map { (hash: $0.key.stableHash, id: $0.eventId) }
        alerts = changes.alerts
        fleet = changes.fleetAlerts
        outbox = changes.outbox
        recordedAt = changes.recordedAt.microseconds
    }

    static let insertEventId = "INSERT OR IGNORE INTO seen_events (device_hash, event_id, recorded_at) VALUES (?, ?, ?)"

    /// Writes the rows in `db`'s current transaction.
    func write(_ db: Database) throws {
        let upsertDevice = try FastStatement(db, """
            INSERT INTO devices (app_id, device_id, state) VALUES (?, ?, ?)
            ON CONFLICT (app_id, device_id) DO UPDATE SET state = excluded.state
            """)
        for d in devices { try upsertDevice.run(.text(d.appId), .text(d.deviceId), .blob(d.state)) }
        let insertId = try FastStatement(db, Self.insertEventId)
        var logged: [(hash: Int64, id: String)] = []
        for e in ids where try insertId.run(.int(e.hash), .text(e.id), .int(recordedAt)) > 0 { logged.append(e) }
        try EventIdLog.append(logged, recordedAt: recordedAt, db)
        let upsertAlert = try db.cachedStatement(sql: """
            INSERT INTO alerts (id, kind, state, app_id, device_id, container_id, starts_at, ends_at, summary, detail)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (id) DO UPDATE SET state = excluded.state, ends_at = excluded.ends_at,
                summary = excluded.summary, detail = excluded.detail
            """)
        for a in alerts {
            try upsertAlert.execute(arguments: [a.id, a.kind.rawValue, a.state.rawValue, a.appId, a.deviceId, a.containerId,
                                                a.startsAt.microseconds, a.endsAt?.microseconds, a.summary, a.detail])
        }
        for (container, startsAt) in fleet {
            if let startsAt {
                try db.execute(sql: "INSERT OR REPLACE INTO fleet_alerts (container_id, starts_at) VALUES (?, ?)", arguments: [container, startsAt.microseconds])
            } else {
                try db.execute(sql: "DELETE FROM fleet_alerts WHERE container_id = ?", arguments: [container])
            }
        }
        try SQLiteStore.insertOutbox(outbox, db)
    }
}

/// A cached statement bound and stepped through the SQLite C API. The per-event and per-device writes of a group
/// commit run through it: GRDB's general binding (an array of boxed values per call) was a tenth of the
/// writer's time.
private struct FastStatement {
    let statement: Statement
    let db: Database

    init(_ db: Database, _ sql: String) throws {
        self.db = db
        statement = try db.cachedStatement(sql: sql)
    }

    /// A value to bind.
    enum Value {
        case int(Int64)
        case text(String)
        case blob([UInt8])
    }

    /// Binds `values` to the parameters in order and runs the statement; returns how many rows it changed.
    @discardableResult
    func run(_ values: Value...) throws -> Int32 {
        let raw = statement.sqliteStatement
        sqlite3_reset(raw)
        // SQLITE_TRANSIENT: SQLite copies text and blobs before the bind call returns.
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        var code = SQLITE_OK
        for (i, value) in values.enumerated() where code == SQLITE_OK {
            let index = Int32(i + 1)
            switch value {
            case .int(let v):
                code = sqlite3_bind_int64(raw, index, v)
            case .text(var v):
                code = v.withUTF8 { text -> Int32 in
                    guard let base = text.baseAddress else { return sqlite3_bind_text(raw, index, "", 0, transient) }
                    return base.withMemoryRebound(to: CChar.self, capacity: text.count) {
                        sqlite3_bind_text(raw, index, $0, Int32(text.count), transient)
                    }
                }
            case .blob(let v):
                code = v.withUnsafeBytes { sqlite3_bind_blob(raw, index, $0.baseAddress, Int32($0.count), transient) }
            }
        }
        if code == SQLITE_OK { code = sqlite3_step(raw) }
        sqlite3_reset(raw)
        guard code == SQLITE_DONE else {
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)), sql: statement.sql)
        }
        return sqlite3_changes(db.sqliteConnection)
    }
}
