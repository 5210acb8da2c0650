import Logging
import PostgresNIO
import SyncHealthCore
import SyncHealthStore
import Synchronization

/// One commit group on one leased connection: a read and a write, each one call of a server-side function
/// (`PostgresGroupSQL`), in autocommit, so that no lock outlives a call.
final class PostgresGroup: SharedGroup {
    let connection: PostgresConnection
    let logger: Logger
    /// This replica's counter shard.
    let shard: Int64
    /// How long a due timer read by a group stays hidden from other replicas.
    let timerLease: Duration
    /// Round trips so far.
    let roundTrips: Atomic<Int>

    /// The store's read of the subscriptions.
    let loadWebhooks: @Sendable () async throws -> [WebhookSubscription]

    init(
        connection: PostgresConnection,
        logger: Logger,
        shard: Int64,
        timerLease: Duration,
        loadWebhooks: @escaping @Sendable () async throws -> [WebhookSubscription]
    ) {
        self.loadWebhooks = loadWebhooks
        self.connection = connection
        self.logger = logger
        self.shard = shard
        self.timerLease = timerLease
        self.roundTrips = Atomic(0)
    }

    func read(_ request: GroupRead) async throws -> GroupSnapshot {
        var hashes: [Int64] = []
        var ids: [String] = []
        for claim in request.claims {
            let hash = claim.key.stableHash
            for id in claim.eventIds {
                hashes.append(hash)
                ids.append(id)
            }
        }
        roundTrips.add(1, ordering: .relaxed)
        let rows = try await connection.query(
            """
            SELECT kind, a, b, state, n1, n2 FROM synchealth_read_group(
                \(request.keys.map(\.appId))::text[], \(request.keys.map(\.deviceId))::text[], \(hashes)::bigint[], \(ids)::text[],
                \(request.now.microseconds), \(Int32(clamping: request.dueLimit))::integer, \(timerLease.microseconds), \(request.containers ?? [])::text[],
                \(request.containers == nil))
            """,
            logger: logger
        )
        var snapshot = GroupSnapshot()
        var seen: [Int64: Set<String>] = [:]
        var fields: [String: [(name: String, value: Int)]] = [:]
        for try await (kind, a, b, state, n1, n2) in rows.decode((String, String?, String?, ByteBuffer?, Int64, Int64).self) {
            switch kind {
            case "d", "u":
                guard let appId = a, let deviceId = b, let state else { throw StoreError.undecodableRecord("group read row \(kind)") }
                let key = DeviceKey(appId: appId, deviceId: deviceId)
                let stored = StoredDevice(record: try PostgresStore.record(key, state), countedAt: Timestamp(microseconds: n1), version: n2)
                if kind == "d" { snapshot.devices.append(stored) } else { snapshot.due.append(stored) }
            case "s":
                if let id = b { seen[n1, default: []].insert(id) }
            case "c":
                if let container = a, let field = b { fields[container, default: []].append((field, Int(n1))) }
            case "f":
                if let container = a { snapshot.fleetAlerts[container] = Timestamp(microseconds: n1) }
            case "w":
                snapshot.subscriptionsDigest = a
            default:
                throw StoreError.undecodableRecord("group read row \(kind)")
            }
        }
        snapshot.seen = request.claims.map { claim in (seen[claim.key.stableHash] ?? []).intersection(claim.eventIds) }
        for container in Set(fields.keys).union(request.containers ?? []) {
            snapshot.counts[container] = FleetCounts(fields: fields[container] ?? [])
        }
        return snapshot
    }

    func webhooks() async throws -> [WebhookSubscription] {
        roundTrips.add(1, ordering: .relaxed)
        return try await loadWebhooks()
    }

    func write(_ write: GroupWrite) async throws -> Bool {
        roundTrips.add(1, ordering: .relaxed)
        do {
            try await Self.write(write, shard: shard, on: connection, logger: logger)
            return true
        } catch let error as PSQLError where PostgresStore.isRetryable(error) {
            logger.debug("A group's devices changed since its read; planning it again")
            return false
        }
    }

    /// One call of `synchealth_write_group`, prepared once per connection. Devices keep their first-seen order
    /// (their position in listings); two writers that share devices in opposite orders deadlock, and the one
    /// PostgreSQL rolls back plans again.
    static func write(_ write: GroupWrite, shard: Int64, on connection: PostgresConnection, logger: Logger) async throws {
        // The function's error, if it raises one, arrives with its result row: read it.
        let rows = try await connection.execute(WriteGroupStatement(write: write, shard: shard), logger: logger)
        for try await _ in rows {}
    }

    /// One item per key, at the place its key first came, holding the last item with that key.
    static func lastPerKey<Item, Key: Hashable>(_ items: [Item], key: (Item) -> Key) -> [Item] {
        var position: [Key: Int] = [:]
        var out: [Item] = []
        for item in items {
            if let i = position[key(item)] {
                out[i] = item
            } else {
                position[key(item)] = out.count
                out.append(item)
            }
        }
        return out
    }
}

/// The arguments of `synchealth_write_group` (`PostgresGroupSQL.writeFunctionV9`, whose body v17 replaced), in its order.
struct WriteGroupStatement: PostgresPreparedStatement {
    static let name = "synchealth_write_group_v9"
    static let sql = """
        SELECT synchealth_write_group($1::text[], $2::text[], $3::bigint[], $4::bytea[], $5::text[], $6::text[], $7::boolean[],
            $8::bigint[], $9::boolean[], $10::bigint[], $11::bigint, $12::boolean, $13::bigint[], $14::text[],
            $15::text[], $16::text[], $17::text[], $18::text[], $19::text[], $20::text[], $21::bigint[], $22::bigint[],
            $23::text[], $24::text[], $25::text[], $26::bigint[], $27::bigint[],
            $28::text[], $29::text[], $30::text[], $31::text[], $32::bigint[], $33::integer[], $34::bigint[], $35::text[],
            $36::bigint, $37::text[], $38::text[], $39::text[], $40::bigint[],
            $41::text[], $42::text[], $43::text[], $44::bigint[], $45::boolean[], $46::text[])
        """
    typealias Row = Int32

    let write: GroupWrite
    let shard: Int64

    func makeBindings() throws -> PostgresBindings {
        let changes = write.changes
        // One row per key: an upsert may not touch a row twice.
        let devices = PostgresGroup.lastPerKey(changes.devices, key: \.key)
        let summaries = devices.map(\.monitor.summary)
        let alerts = PostgresGroup.lastPerKey(changes.alerts, key: \.id)
        var counters: [(app: String, container: String, field: String, delta: Int64)] = []
        for (scope, counts) in write.counters.nonZeroScopes {
            for (name, value) in counts.nonZeroFields {
                counters.append((scope.appId ?? "", scope.containerId ?? "", name, Int64(value)))
            }
        }
        counters.sort { ($0.app, $0.container, $0.field) < ($1.app, $1.container, $1.field) }
        let fleet = changes.fleetAlerts.sorted { $0.containerId < $1.containerId }
        let outbox = changes.outbox

        let removals = PostgresGroup.lastPerKey(changes.removals, key: \.key)

        var b = PostgresBindings(capacity: 46)
        // Devices. Strings stand for NULL as '' and numbers as -1: postgres-nio binds no NULL inside an array.
        b.append(devices.map(\.key.appId))
        b.append(devices.map(\.key.deviceId))
        b.append(devices.map(\.key.stableHash))
        b.append(devices.map { ByteBuffer(bytes: $0.binaryEncoded()) })
        b.append(devices.map { $0.info.containerId ?? "" })
        b.append(summaries.map(\.rawValue))
        b.append(summaries.map(\.isBroken))
        b.append(devices.map { changes.deadlines[$0.key]?.microseconds ?? -1 })
        // The deadline as planned, or only if earlier than the stored one.
        b.append(devices.map { write.claimedTimers.contains($0.key) })
        b.append(devices.map { write.versions[$0.key] ?? 0 })
        b.append(changes.recordedAt.microseconds)
        // `guarded`: always. The function's unguarded mode served a direct write the engine never made; the
        // function is frozen in its migration, so the argument stays.
        b.append(true)
        // Event ids.
        b.append(changes.eventIds.map(\.key.stableHash))
        b.append(changes.eventIds.map(\.eventId))
        // Alerts.
        b.append(alerts.map(\.id))
        b.append(alerts.map(\.kind.rawValue))
        b.append(alerts.map(\.state.rawValue))
        b.append(alerts.map { $0.appId ?? "" })
        b.append(alerts.map { $0.deviceId ?? "" })
        b.append(alerts.map { $0.containerId ?? "" })
        b.append(alerts.map(\.startsAt.microseconds))
        b.append(alerts.map { $0.endsAt?.microseconds ?? -1 })
        b.append(alerts.map(\.summary))
        b.append(alerts.map(\.detail))
        // Fleet alerts.
        b.append(fleet.map(\.containerId))
        b.append(fleet.map { $0.startsAt?.microseconds ?? -1 })
        b.append(fleet.map { write.fleetAlertsRead[$0.containerId]?.microseconds ?? -1 })
        // Webhook messages.
        b.append(outbox.map(\.id))
        b.append(outbox.map(\.webhookId))
        b.append(outbox.map(\.orderingKey.storageKey))
        b.append(outbox.map(\.payload))
        b.append(outbox.map(\.createdAt.microseconds))
        b.append(outbox.map { Int32($0.attempts) })
        b.append(outbox.map(\.nextAttemptAt.microseconds))
        b.append(outbox.map(\.state.rawValue))
        // Counter deltas, in this replica's shard.
        b.append(shard)
        b.append(counters.map(\.app))
        b.append(counters.map(\.container))
        b.append(counters.map(\.field))
        b.append(counters.map(\.delta))
        // Why alerts resolved, and removals.
        b.append(alerts.map { $0.reason?.rawValue ?? "" })
        b.append(removals.map(\.key.appId))
        b.append(removals.map(\.key.deviceId))
        b.append(removals.map { write.versions[$0.key] ?? 0 })
        b.append(removals.map { $0.reason == .erased })
        b.append(removals.filter { $0.reason == .erased }.flatMap(\.orderingKeys).map(\.storageKey))
        return b
    }

    func decodeRow(_ row: PostgresRow) throws -> Int32 {
        try row.decode(Int32.self)
    }
}
