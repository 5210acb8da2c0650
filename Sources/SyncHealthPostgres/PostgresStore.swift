import Foundation
public import Logging
import Metrics
import PostgresNIO
public import ServiceLifecycle
public import SyncHealthCore
public import SyncHealthStore
import Synchronization

/// The store for several replicas over one PostgreSQL database, through postgres-nio.
///
/// A commit group is at most two round trips, each a call of a server-side function in autocommit: a read (devices
/// with their versions, due timers claimed for a lease, seen ids, counts, fleet alerts), skipped when the replica
/// knows them, and a write that applies everything only if no device, fleet alert or event id it planned on
/// changed meanwhile. No lock outlives a call, and only writers of the
/// same device meet on a row: fleet counters are deltas in a shard per replica, summed on read. Webhook messages
/// are leased with `FOR UPDATE SKIP LOCKED`. The connection pool is a `Service`: run it (`service`) before using
/// the store.
public final class PostgresStore: SharedSyncStore {
    let client: PostgresClient
    let logger: Logger
    /// The URL without its password, for messages.
    public let displayName: String
    /// How long a replica holds a webhook message it is sending before another may take it.
    public let deliveryLease: Duration
    /// How long a due timer a group read stays hidden from the other replicas (the group writes it long before).
    public let timerLease: Duration = .seconds(30)
    /// This replica's shard of the fleet counters: random, so that no two replicas share one.
    public let shard = Int64.random(in: 1...Int64.max)
    let roundTripsPerGroup = Recorder(label: "synchealth_postgres_round_trips_per_group")
    private let groupRoundTripsSoFar = Atomic<Int>(0)
    /// The round trips of every commit group so far (`synchealth_postgres_round_trips_per_group` has them per group).
    public var groupRoundTrips: Int { groupRoundTripsSoFar.load(ordering: .relaxed) }
    private let queriesSoFar = Atomic<Int>(0)
    /// The statements sent outside commit groups so far (reads, webhook and silence writes, history): what a read
    /// endpoint costs in round trips.
    public var queriesSent: Int { queriesSoFar.load(ordering: .relaxed) }

    /// Counts the statements sent from the task that binds it (and its child tasks): what one request costs in
    /// round trips, apart from what the services beside it send meanwhile.
    @_spi(Testing) public static let tally = TaskLocal<QueryTally?>(wrappedValue: nil)

    /// Sends one statement outside a commit group, and counts it.
    func run(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence {
        queriesSoFar.add(1, ordering: .relaxed)
        Self.tally.get()?.count.add(1, ordering: .relaxed)
        return try await client.query(query, logger: logger)
    }

    /// Creates a store for `url` (`postgres://user:password@host:port/database?sslmode=disable|prefer|require`).
    ///
    /// - Throws: `StoreError.unavailable` for a URL that cannot be used.
    public init(url: String, deliveryLease: Duration = .seconds(60), logger: Logger) throws {
        guard let parts = URLComponents(string: url), ["postgres", "postgresql"].contains(parts.scheme ?? ""),
            let host = parts.host, !host.isEmpty
        else {
            throw StoreError.unavailable(path: "SYNCHEALTH_DATABASE_URL", reason: "expected postgres://user:password@host:port/database")
        }
        let database = parts.path.hasPrefix("/") ? String(parts.path.dropFirst()) : parts.path
        let mode = parts.queryItems?.first { $0.name == "sslmode" }?.value ?? "prefer"
        let tls: PostgresClient.Configuration.TLS
        switch mode {
        case "disable": tls = .disable
        case "prefer": tls = .prefer(.makeClientConfiguration())
        case "require", "verify-full": tls = .require(.makeClientConfiguration())
        default: throw StoreError.unavailable(path: "SYNCHEALTH_DATABASE_URL", reason: "unknown sslmode \(mode)")
        }
        var configuration = PostgresClient.Configuration(
            host: host,
            port: parts.port ?? 5432,
            username: parts.user ?? "postgres",
            password: parts.password,
            database: database.isEmpty ? nil : database,
            tls: tls
        )
        configuration.options.maximumConnections = 16
        self.client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.logger = logger
        self.deliveryLease = deliveryLease
        self.displayName = "postgres://\(host):\(parts.port ?? 5432)/\(database)"
    }

    /// The connection pool, to run in the service group before the store is used.
    public var service: some Service { client }

    public func prepare() async throws {
        try await migrate()
    }

    public func group<T: Sendable>(_ body: (any SharedGroup) async throws -> T) async throws -> T {
        try await client.withConnection { connection in
            let group = PostgresGroup(connection: connection, logger: logger, shard: shard, timerLease: timerLease) {
                try await self.webhooks()
            }
            defer {
                let trips = group.roundTrips.load(ordering: .relaxed)
                if trips > 0 {
                    roundTripsPerGroup.record(trips)
                    groupRoundTripsSoFar.add(trips, ordering: .relaxed)
                }
            }
            return try await body(group)
        }
    }

    public func heartbeat(now: Timestamp, deadBefore: Timestamp) async throws {
        try await run(
            """
            INSERT INTO replicas (shard, seen_at) VALUES (\(shard), \(now.microseconds))
            ON CONFLICT (shard) DO UPDATE SET seen_at = excluded.seen_at
            """,
            logger: logger
        )
        // One statement: the dead replicas' rows move to shard 0 at once, or not at all.
        try await run(
            """
            WITH dead AS (DELETE FROM replicas WHERE seen_at < \(deadBefore.microseconds) RETURNING shard),
            moved AS (DELETE FROM fleet_counters WHERE shard IN (SELECT shard FROM dead) RETURNING app_id, container_id, field, n)
            INSERT INTO fleet_counters (shard, app_id, container_id, field, n)
            SELECT 0, app_id, container_id, field, sum(n) FROM moved GROUP BY app_id, container_id, field
            ON CONFLICT (shard, app_id, container_id, field) DO UPDATE SET n = fleet_counters.n + excluded.n
            """,
            logger: logger
        )
    }

    /// Runs `body` in a transaction on a pooled connection; retries lock conflicts; rethrows the cause of a
    /// failure rather than postgres-nio's wrapper.
    func withTransaction<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await client.withTransaction(logger: logger) { connection in try await body(connection) }
            } catch let error as PostgresTransactionError {
                // The body's own error (or the database's) is what callers see, not the wrapper.
                let cause = error.closureError ?? error.commitError ?? error.beginError ?? error
                if attempt < 8, Self.isRetryable(cause) {
                    logger.debug("Retrying a transaction that lost a lock conflict", metadata: ["attempt": "\(attempt)"])
                    continue
                }
                throw cause
            }
        }
    }

    /// Deadlocks and serialization failures: the transaction was rolled back and may simply run again.
    static func isRetryable(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError, let state = error.serverInfo?[.sqlState] else { return false }
        return state == "40P01" || state == "40001"
    }

    // MARK: SyncStore

    public func loadState() async throws -> PersistedState {
        var devices: [DeviceRecord] = []
        let rows = try await run("SELECT app_id, device_id, state FROM devices ORDER BY seq", logger: logger)
        for try await (appId, deviceId, state) in rows.decode((String, String, ByteBuffer).self) {
            devices.append(try Self.record(DeviceKey(appId: appId, deviceId: deviceId), state))
        }
        var fleet: [String: Timestamp] = [:]
        for try await (container, startsAt) in try await run("SELECT container_id, starts_at FROM fleet_alerts", logger: logger)
            .decode((String, Int64).self)
        {
            fleet[container] = Timestamp(microseconds: startsAt)
        }
        return PersistedState(devices: devices, fleetAlerts: fleet)
    }

    public func alerts(_ query: AlertQuery) async throws -> AlertPage {
        let rows = try await run(
            """
            SELECT \(unescaped: Self.alertColumns) FROM alerts
            WHERE seq < \(query.cursor ?? Int64.max)
              AND (\(query.state?.rawValue)::text IS NULL OR state = \(query.state?.rawValue))
              AND (\(query.kind?.rawValue)::text IS NULL OR kind = \(query.kind?.rawValue))
              AND (\(query.appId)::text IS NULL OR app_id = \(query.appId))
              AND (\(query.deviceId)::text IS NULL OR device_id = \(query.deviceId))
            ORDER BY seq DESC LIMIT \(query.limit + 1)
            """,
            logger: logger
        )
        let numbered = try await Self.alerts(rows)
        let alerts = numbered.map(\.alert)
        guard alerts.count > query.limit else { return AlertPage(alerts: alerts, nextCursor: nil) }
        return AlertPage(alerts: Array(alerts.prefix(query.limit)), nextCursor: numbered[query.limit - 1].seq)
    }

    /// The columns `alerts(_:)` decodes.
    static let alertColumns = "seq, id, kind, state, app_id, device_id, container_id, starts_at, ends_at, summary, detail, reason, app_version"

    /// Alerts, with their `seq`, from rows of `alertColumns`.
    static func alerts(_ rows: PostgresRowSequence) async throws -> [(seq: Int64, alert: AlertRecord)] {
        var alerts: [(seq: Int64, alert: AlertRecord)] = []
        typealias Row = (Int64, String, String, String, String?, String?, String?, Int64, Int64?, String, String, String?, String?)
        for try await row in rows.decode(Row.self) {
            guard let kind = AlertKind(rawValue: row.2), let state = AlertState(rawValue: row.3) else {
                throw StoreError.undecodableRecord("alert \(row.1)")
            }
            let alert = AlertRecord(
                id: row.1,
                kind: kind,
                state: state,
                deviceId: row.5,
                appId: row.4,
                containerId: row.6,
                startsAt: Timestamp(microseconds: row.7),
                endsAt: row.8.map(Timestamp.init(microseconds:)),
                summary: row.9,
                detail: row.10,
                reason: row.11.flatMap(ResolveReason.init(rawValue:)),
                appVersion: row.12
            )
            alerts.append((row.0, alert))
        }
        return alerts
    }

    public func alerts(ids: [String]) async throws -> [AlertRecord] {
        guard !ids.isEmpty else { return [] }
        let rows = try await run(
            """
            SELECT \(unescaped: Self.alertColumns) FROM alerts
            WHERE id = ANY(\(ids)::text[])
            """,
            logger: logger
        )
        return try await Self.alerts(rows).map(\.alert)
    }

    /// Listens on one connection of the pool for as long as `body` runs.
    public func followTransitions(
        _ body: @Sendable (_ notices: AsyncThrowingStream<TransitionNotice, any Error>) async throws -> Void
    ) async throws {
        try await client.withConnection { connection in
            try await connection.listen(on: "synchealth_transitions") { notifications in
                let (notices, continuation) = AsyncThrowingStream.makeStream(of: TransitionNotice.self)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        do {
                            for try await notification in notifications {
                                if let notice = TransitionNotice(payload: notification.payload) { continuation.yield(notice) }
                            }
                            continuation.finish()
                        } catch {
                            continuation.finish(throwing: error)
                        }
                    }
                    defer { group.cancelAll() }
                    try await body(notices)
                }
            }
        }
    }

    public func recentTransitions(limit: Int) async throws -> [AlertRecord] {
        let rows = try await run(
            """
            SELECT \(unescaped: Self.alertColumns) FROM alerts
            WHERE seq IN (SELECT seq FROM alerts ORDER BY seq DESC LIMIT \(limit))
               OR seq IN (SELECT seq FROM alerts WHERE state = 'resolved' ORDER BY ends_at DESC LIMIT \(limit))
            ORDER BY seq
            """,
            logger: logger
        )
        return AlertTransitions.recent(try await Self.alerts(rows).map(\.alert), limit: limit)
    }

    public func pruneHistory(before cutoff: Timestamp, limit: Int) async throws -> Int {
        var removed = 0
        for try await n in try await run(
            """
            WITH alerts_gone AS (
                DELETE FROM alerts WHERE seq IN
                    (SELECT seq FROM alerts WHERE state = 'resolved' AND ends_at < \(cutoff.microseconds) ORDER BY ends_at LIMIT \(limit))
                RETURNING 1),
            attempts_gone AS (
                DELETE FROM deliveries WHERE seq IN (SELECT seq FROM deliveries ORDER BY seq LIMIT \(limit))
                    AND attempted_at < \(cutoff.microseconds)
                RETURNING 1),
            incidents_gone AS (
                DELETE FROM incidents WHERE seq IN
                    (SELECT seq FROM incidents WHERE state = 'resolved' AND resolved_at < \(cutoff.microseconds) LIMIT \(limit))
                RETURNING 1)
            SELECT (SELECT COUNT(*) FROM alerts_gone) + (SELECT COUNT(*) FROM attempts_gone) + (SELECT COUNT(*) FROM incidents_gone)
            """,
            logger: logger
        ).decode(Int.self) {
            removed = n
        }
        return removed
    }

    public func pruneEventIds(recordedBefore cutoff: Timestamp, limit: Int) async throws -> Int {
        var removed = 0
        for try await n in try await run(
            """
            WITH gone AS (
                DELETE FROM seen_events WHERE ctid IN
                    (SELECT ctid FROM seen_events WHERE recorded_at < \(cutoff.microseconds) ORDER BY recorded_at LIMIT \(limit))
                RETURNING 1)
            SELECT COUNT(*) FROM gone
            """,
            logger: logger
        ).decode(Int.self) {
            removed = n
        }
        return removed
    }

    /// Nothing to release: the connection pool stops with its service.
    public func close() async throws {}

    // MARK: SharedSyncStore reads

    public func device(_ key: DeviceKey) async throws -> DeviceRecord? {
        let rows = try await run("SELECT state FROM devices WHERE app_id = \(key.appId) AND device_id = \(key.deviceId)", logger: logger)
        for try await state in rows.decode(ByteBuffer.self) { return try Self.record(key, state) }
        return nil
    }

    public func devices(_ keys: [DeviceKey]) async throws -> [DeviceKey: DeviceRecord] {
        guard !keys.isEmpty else { return [:] }
        let rows = try await run(
            """
            SELECT d.app_id, d.device_id, d.state FROM devices d
            JOIN unnest(\(keys.map(\.appId))::text[], \(keys.map(\.deviceId))::text[]) AS k(app_id, device_id)
              ON d.app_id = k.app_id AND d.device_id = k.device_id
            """,
            logger: logger
        )
        var records: [DeviceKey: DeviceRecord] = [:]
        for try await (appId, deviceId, state) in rows.decode((String, String, ByteBuffer).self) {
            let key = DeviceKey(appId: appId, deviceId: deviceId)
            records[key] = try Self.record(key, state)
        }
        return records
    }

    public func eraseEventIds(of key: DeviceKey, recordedThrough: Timestamp) async throws {
        _ = try await run(
            "DELETE FROM seen_events WHERE device_hash = \(key.stableHash) AND recorded_at <= \(recordedThrough.microseconds)",
            logger: logger
        )
    }

    public func deviceKeys(deviceId: String) async throws -> [DeviceKey] {
        var keys: [DeviceKey] = []
        for try await appId in try await run("SELECT app_id FROM devices WHERE device_id = \(deviceId) ORDER BY seq", logger: logger)
            .decode(String.self)
        {
            keys.append(DeviceKey(appId: appId, deviceId: deviceId))
        }
        return keys
    }

    public func devices(
        _ query: DeviceQuery,
        after cursor: Int64,
        limit: Int
    ) async throws -> (records: [DeviceRecord], positions: [Int64], nextCursor: Int64?) {
        let rows = try await run(
            """
            SELECT seq, app_id, device_id, state FROM devices
            WHERE seq > \(cursor)
              AND (\(query.appId)::text IS NULL OR app_id = \(query.appId))
              AND (\(query.containerId)::text IS NULL OR container_id = \(query.containerId))
              AND (\(query.summary?.rawValue)::text IS NULL OR summary = \(query.summary?.rawValue))
              AND (\(query.broken)::boolean IS NULL OR broken = \(query.broken))
            ORDER BY seq LIMIT \(limit + 1)
            """,
            logger: logger
        )
        var records: [DeviceRecord] = []
        var positions: [Int64] = []
        for try await (seq, appId, deviceId, state) in rows.decode((Int64, String, String, ByteBuffer).self) {
            if records.count == limit { return (records, positions, positions.last) }
            records.append(try Self.record(DeviceKey(appId: appId, deviceId: deviceId), state))
            positions.append(seq)
        }
        return (records, positions, nil)
    }

    public func counts(_ scope: FleetScope) async throws -> FleetCounts {
        var fields: [(name: String, value: Int)] = []
        for try await (field, n) in try await run(
            """
            SELECT field, sum(n)::bigint FROM fleet_counters WHERE app_id = \(scope.appId ?? "") AND container_id = \(scope.containerId ?? "")
            GROUP BY field
            """,
            logger: logger
        ).decode((String, Int).self) {
            fields.append((field, n))
        }
        return FleetCounts(fields: fields)
    }

    public func allCounts() async throws -> [FleetScope: FleetCounts] {
        var fields: [FleetScope: [(name: String, value: Int)]] = [:]
        for try await (appId, containerId, field, n) in try await run(
            """
            SELECT app_id, container_id, field, n FROM
                (SELECT app_id, container_id, field, sum(n)::bigint AS n FROM fleet_counters GROUP BY app_id, container_id, field) AS sums
            WHERE n <> 0
            """,
            logger: logger
        ).decode((String, String, String, Int).self) {
            fields[FleetScope(appId: appId.isEmpty ? nil : appId, containerId: containerId.isEmpty ? nil : containerId), default: []]
                .append((field, n))
        }
        return fields.mapValues { FleetCounts(fields: $0) }.filter { $0.value.devices > 0 }
    }

    public func nextDeviceDeadline() async throws -> Timestamp? {
        for try await due in try await run("SELECT MIN(due_at) FROM devices WHERE due_at IS NOT NULL", logger: logger)
            .decode(Int64?.self)
        {
            return due.map(Timestamp.init(microseconds:))
        }
        return nil
    }

    static func record(_ key: DeviceKey, _ state: ByteBuffer) throws -> DeviceRecord {
        do {
            return try DeviceRecord(key: key, binary: Array(state.readableBytesView))
        } catch {
            throw StoreError.undecodableRecord("device \(key)")
        }
    }
}

/// The statements a task sent (`PostgresStore.tally`).
@_spi(Testing) public final class QueryTally: Sendable {
    let count = Atomic<Int>(0)

    /// A tally at zero.
    public init() {}

    /// The statements counted so far.
    public var queries: Int { count.load(ordering: .relaxed) }
}
