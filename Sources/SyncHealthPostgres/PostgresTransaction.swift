import Logging
import PostgresNIO
import SyncHealthCore
import SyncHealthStore

/// One transaction on one leased connection. Lock order, which every replica follows: device advisory locks
/// (sorted), device rows, due-timer claims (which never wait), container advisory locks (sorted), counter
/// rows (sorted), then plain writes.
struct PostgresTransaction: SharedTransaction {
    let connection: PostgresConnection
    let logger: Logger

    /// Advisory locks of devices use the one-bigint key space; containers use the (int, int) space, which
    /// PostgreSQL keeps apart from it.
    static let containerLockSpace: Int32 = 0x5348

    func lockDevices(_ keys: [DeviceKey]) async throws -> [DeviceKey: StoredDevice] {
        guard !keys.isEmpty else { return [:] }
        let hashes = Array(Set(keys.map(\.stableHash))).sorted()
        // unnest yields the sorted array in order, so the locks are taken in order.
        try await connection.query("SELECT pg_advisory_xact_lock(h) FROM unnest(\(hashes)::bigint[]) AS h", logger: logger)
        let rows = try await connection.query(
            """
            SELECT app_id, device_id, state, counted_at FROM devices
            WHERE (app_id, device_id) IN (SELECT * FROM unnest(\(keys.map(\.appId))::text[], \(keys.map(\.deviceId))::text[]))
            FOR UPDATE
            """,
            logger: logger
        )
        var found: [DeviceKey: StoredDevice] = [:]
        for try await (appId, deviceId, state, countedAt) in rows.decode((String, String, ByteBuffer, Int64).self) {
            let key = DeviceKey(appId: appId, deviceId: deviceId)
            found[key] = StoredDevice(record: try PostgresStore.record(key, state), countedAt: Timestamp(microseconds: countedAt))
        }
        return found
    }

    func claimDueDevices(now: Timestamp, limit: Int) async throws -> [StoredDevice] {
        let rows = try await connection.query(
            """
            SELECT app_id, device_id, state, counted_at FROM devices
            WHERE due_at <= \(now.microseconds) ORDER BY due_at LIMIT \(limit)
            FOR UPDATE SKIP LOCKED
            """,
            logger: logger
        )
        var claimed: [StoredDevice] = []
        for try await (appId, deviceId, state, countedAt) in rows.decode((String, String, ByteBuffer, Int64).self) {
            let key = DeviceKey(appId: appId, deviceId: deviceId)
            claimed.append(StoredDevice(record: try PostgresStore.record(key, state), countedAt: Timestamp(microseconds: countedAt)))
        }
        return claimed
    }

    func seenEventIds(_ requests: [(key: DeviceKey, eventIds: [String])]) async throws -> [Set<String>] {
        var hashes: [Int64] = []
        var ids: [String] = []
        for request in requests {
            let hash = request.key.stableHash
            for id in request.eventIds {
                hashes.append(hash)
                ids.append(id)
            }
        }
        guard !ids.isEmpty else { return requests.map { _ in [] } }
        var seen: [Int64: Set<String>] = [:]
        let rows = try await connection.query(
            """
            SELECT device_hash, event_id FROM seen_events
            WHERE (device_hash, event_id) IN (SELECT * FROM unnest(\(hashes)::bigint[], \(ids)::text[]))
            """,
            logger: logger
        )
        for try await (hash, id) in rows.decode((Int64, String).self) { seen[hash, default: []].insert(id) }
        return requests.map { request in
            let known = seen[request.key.stableHash] ?? []
            return known.intersection(request.eventIds)
        }
    }

    func addCounts(_ deltas: FleetCounters, returning containers: [String]) async throws -> [String: FleetCounts] {
        let containers = Array(Set(containers)).sorted()
        if !containers.isEmpty {
            let hashes = Array(Set(containers.map(Self.containerHash))).sorted()
            try await connection.query(
                """
                SELECT pg_advisory_xact_lock(\(Self.containerLockSpace), h) FROM unnest(\(hashes)::integer[]) AS h
                """,
                logger: logger
            )
        }
        var rows: [(app: String, container: String, field: String, delta: Int64)] = []
        for (scope, counts) in deltas.nonZeroScopes {
            for (name, value) in counts.nonZeroFields {
                rows.append((scope.appId ?? "", scope.containerId ?? "", name, Int64(value)))
            }
        }
        rows.sort { ($0.app, $0.container, $0.field) < ($1.app, $1.container, $1.field) }
        if !rows.isEmpty {
            try await connection.query(
                """
                INSERT INTO fleet_counters (app_id, container_id, field, n)
                SELECT * FROM unnest(\(rows.map(\.app))::text[], \(rows.map(\.container))::text[], \(rows.map(\.field))::text[], \(rows.map(\.delta))::bigint[])
                ON CONFLICT (app_id, container_id, field) DO UPDATE SET n = fleet_counters.n + excluded.n
                """,
                logger: logger
            )
        }
        guard !containers.isEmpty else { return [:] }
        var fields: [String: [(name: String, value: Int)]] = [:]
        for try await (container, field, n) in try await connection.query(
            """
            SELECT container_id, field, n FROM fleet_counters WHERE app_id = '' AND container_id = ANY(\(containers)::text[])
            """,
            logger: logger
        ).decode((String, String, Int).self) {
            fields[container, default: []].append((field, n))
        }
        var counts: [String: FleetCounts] = [:]
        for container in containers { counts[container] = FleetCounts(fields: fields[container] ?? []) }
        return counts
    }

    /// A 32-bit hash of a container id (FNV-1a), for its advisory lock.
    static func containerHash(_ container: String) -> Int32 {
        var hash: UInt32 = 0x811c_9dc5
        for byte in container.utf8 { hash = (hash ^ UInt32(byte)) &* 0x0100_0193 }
        return Int32(bitPattern: hash)
    }

    func fleetAlerts(_ containers: [String]) async throws -> [String: Timestamp] {
        var firing: [String: Timestamp] = [:]
        for try await (container, startsAt) in try await connection.query(
            """
            SELECT container_id, starts_at FROM fleet_alerts WHERE container_id = ANY(\(containers)::text[])
            """,
            logger: logger
        ).decode((String, Int64).self) {
            firing[container] = Timestamp(microseconds: startsAt)
        }
        return firing
    }

    func write(_ changes: StoreChanges) async throws {
        let recordedAt = changes.recordedAt.microseconds
        // One row per key (the last one wins): an upsert may not touch a row twice.
        var position: [DeviceKey: Int] = [:]
        var devices: [DeviceRecord] = []
        for device in changes.devices {
            if let i = position[device.key] {
                devices[i] = device
            } else {
                position[device.key] = devices.count
                devices.append(device)
            }
        }
        if !devices.isEmpty {
            let states = devices.map { ByteBuffer(bytes: $0.binaryEncoded()) }
            let summaries = devices.map(\.monitor.summary)
            try await connection.query(
                """
                INSERT INTO devices (app_id, device_id, key_hash, state, container_id, summary, broken, due_at, counted_at)
                SELECT a, d, h, s, NULLIF(c, ''), su, b, NULLIF(du, -1), \(recordedAt)
                FROM unnest(\(devices.map(\.key.appId))::text[], \(devices.map(\.key.deviceId))::text[], \(devices.map(\.key.stableHash))::bigint[],
                            \(states)::bytea[], \(devices.map { $0.info.containerId ?? "" })::text[], \(summaries.map(\.rawValue))::text[],
                            \(summaries.map(\.isBroken))::boolean[], \(devices.map { changes.deadlines[$0.key]?.microseconds ?? -1 })::bigint[])
                    AS t(a, d, h, s, c, su, b, du)
                ON CONFLICT (app_id, device_id) DO UPDATE SET state = excluded.state, container_id = excluded.container_id,
                    summary = excluded.summary, broken = excluded.broken, due_at = excluded.due_at, counted_at = excluded.counted_at
                """,
                logger: logger
            )
        }
        if !changes.eventIds.isEmpty {
            try await connection.query(
                """
                INSERT INTO seen_events (device_hash, event_id, recorded_at)
                SELECT h, e, \(recordedAt) FROM unnest(\(changes.eventIds.map(\.key.stableHash))::bigint[], \(changes.eventIds.map(\.eventId))::text[]) AS t(h, e)
                ON CONFLICT DO NOTHING
                """,
                logger: logger
            )
        }
        for a in changes.alerts {
            try await connection.query(
                """
                INSERT INTO alerts (id, kind, state, app_id, device_id, container_id, starts_at, ends_at, summary, detail)
                VALUES (\(a.id), \(a.kind.rawValue), \(a.state.rawValue), \(a.appId), \(a.deviceId), \(a.containerId),
                        \(a.startsAt.microseconds), \(a.endsAt?.microseconds), \(a.summary), \(a.detail))
                ON CONFLICT (id) DO UPDATE SET state = excluded.state, ends_at = excluded.ends_at,
                    summary = excluded.summary, detail = excluded.detail
                """,
                logger: logger
            )
        }
        for (container, startsAt) in changes.fleetAlerts {
            if let startsAt {
                try await connection.query(
                    """
                    INSERT INTO fleet_alerts (container_id, starts_at) VALUES (\(container), \(startsAt.microseconds))
                    ON CONFLICT (container_id) DO UPDATE SET starts_at = excluded.starts_at
                    """,
                    logger: logger
                )
            } else {
                try await connection.query("DELETE FROM fleet_alerts WHERE container_id = \(container)", logger: logger)
            }
        }
        for m in changes.outbox {
            try await connection.query(
                """
                INSERT INTO outbox (id, webhook_id, ordering_key, payload, created_at, attempts, next_attempt_at, state)
                VALUES (\(m.id), \(m.webhookId), \(m.orderingKey), \(m.payload), \(m.createdAt.microseconds), \(m.attempts),
                        \(m.nextAttemptAt.microseconds), \(m.state.rawValue))
                ON CONFLICT (id) DO NOTHING
                """,
                logger: logger
            )
        }
    }
}
