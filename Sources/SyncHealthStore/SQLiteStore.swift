#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import GRDB
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
        let claims = requests.map { (hash: $0.key.stableHash, ids: $0.eventIds.map { Array($0.utf8) }) }
        return try await pool.read { db in
            let group = try EventIdBuckets.Group(claims, db)
            return zip(requests, claims).map { request, claim in
                Set(zip(request.eventIds, claim.ids).filter { group.recordedBefore(claim.hash, $0.1) }.map(\.0))
            }
        }
    }

    public func commit(_ changes: StoreChanges) async throws {
        if changes.isEmpty { return }
        let rows = Rows(changes)
        try await pool.write { db in try rows.write(db) }
        checkpointer.signal()
    }

    /// Records the claimed ids, plans and writes in one transaction on the writer: each device's buckets of ids
    /// are read once, judged and recorded in memory, and written back once.
    public func commit<Result: Sendable>(claiming claims: [(key: DeviceKey, eventIds: [String])], at recordedAt: Timestamp,
                                         plan: @escaping @Sendable (_ seen: [Set<String>]) throws -> (changes: StoreChanges, result: Result))
        async throws -> Result {
        let encoded = claims.map { (hash: $0.key.stableHash, ids: $0.eventIds.map { Array($0.utf8) }) }
        defer { checkpointer.signal() }
        return try await pool.write { db in
            var group = try EventIdBuckets.Group(encoded, db)
            // An id in a bucket was recorded before this group; one this group recorded is a repeat within it,
            // which the caller judges.
            var seen: [Set<String>] = []
            seen.reserveCapacity(claims.count)
            for (claim, ids) in zip(claims, encoded) {
                var before = Set<String>()
                for (id, bytes) in zip(claim.eventIds, ids.ids) {
                    if group.recordedBefore(ids.hash, bytes) {
                        before.insert(id)
                    } else {
                        _ = group.record(ids.hash, bytes, at: recordedAt.microseconds)
                    }
                }
                seen.append(before)
            }
            try group.write(db)
            var (changes, result) = try plan(seen)
            changes.eventIds = []
            try Rows(changes).write(db)
            return result
        }
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
        try await pool.write { db in try EventIdBuckets.prune(recordedBefore: cutoff.microseconds, limit: limit, db) }
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

    /// Writes the rows in `db`'s current transaction.
    func write(_ db: Database) throws {
        let upsertDevice = try FastStatement(db, """
            INSERT INTO devices (app_id, device_id, state) VALUES (?, ?, ?)
            ON CONFLICT (app_id, device_id) DO UPDATE SET state = excluded.state
            """)
        for d in devices { try upsertDevice.run(.text(d.appId), .text(d.deviceId), .blob(d.state)) }
        if !ids.isEmpty {
            let claims = ids.map { (hash: $0.hash, ids: [Array($0.id.utf8)]) }
            var group = try EventIdBuckets.Group(claims, db)
            for claim in claims where !group.recordedBefore(claim.hash, claim.ids[0]) {
                _ = group.record(claim.hash, claim.ids[0], at: recordedAt)
            }
            try group.write(db)
        }
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
