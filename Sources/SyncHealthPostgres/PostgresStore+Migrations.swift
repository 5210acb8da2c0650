import Logging
import PostgresNIO
import SyncHealthStore

extension PostgresStore {
    /// The schema, as append-only migrations of single statements. Never edit one that has shipped: add one.
    static let migrations: [(name: String, statements: [PostgresQuery])] = [
        (
            "v1: devices, timers, counters, event ids, alerts, webhooks",
            [
                """
                CREATE TABLE devices (
                    seq BIGSERIAL UNIQUE,
                    app_id TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    key_hash BIGINT NOT NULL,
                    state BYTEA NOT NULL,
                    container_id TEXT,
                    summary TEXT NOT NULL,
                    broken BOOLEAN NOT NULL,
                    due_at BIGINT,
                    counted_at BIGINT NOT NULL,
                    PRIMARY KEY (app_id, device_id)
                )
                """,
                "CREATE INDEX devices_due ON devices (due_at) WHERE due_at IS NOT NULL",
                "CREATE INDEX devices_device_id ON devices (device_id)",
                """
                CREATE TABLE seen_events (
                    device_hash BIGINT NOT NULL,
                    event_id TEXT NOT NULL,
                    recorded_at BIGINT NOT NULL,
                    PRIMARY KEY (device_hash, event_id)
                )
                """,
                "CREATE INDEX seen_events_recorded_at ON seen_events (recorded_at)",
                """
                CREATE TABLE fleet_counters (
                    app_id TEXT NOT NULL,
                    container_id TEXT NOT NULL,
                    field TEXT NOT NULL,
                    n BIGINT NOT NULL,
                    PRIMARY KEY (app_id, container_id, field)
                )
                """,
                """
                CREATE TABLE alerts (
                    seq BIGSERIAL PRIMARY KEY,
                    id TEXT NOT NULL UNIQUE,
                    kind TEXT NOT NULL,
                    state TEXT NOT NULL,
                    app_id TEXT,
                    device_id TEXT,
                    container_id TEXT,
                    starts_at BIGINT NOT NULL,
                    ends_at BIGINT,
                    summary TEXT NOT NULL,
                    detail TEXT NOT NULL
                )
                """,
                "CREATE INDEX alerts_state_seq ON alerts (state, seq)",
                "CREATE TABLE fleet_alerts (container_id TEXT PRIMARY KEY, starts_at BIGINT NOT NULL)",
                """
                CREATE TABLE webhooks (
                    id TEXT PRIMARY KEY,
                    url TEXT NOT NULL,
                    kinds TEXT NOT NULL,
                    description TEXT,
                    secret TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    disabled_reason TEXT
                )
                """,
                """
                CREATE TABLE outbox (
                    seq BIGSERIAL PRIMARY KEY,
                    id TEXT NOT NULL UNIQUE,
                    webhook_id TEXT NOT NULL,
                    ordering_key TEXT NOT NULL,
                    payload TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    attempts INTEGER NOT NULL,
                    next_attempt_at BIGINT NOT NULL,
                    state TEXT NOT NULL,
                    lease_until BIGINT
                )
                """,
                "CREATE INDEX outbox_due ON outbox (state, next_attempt_at)",
                "CREATE INDEX outbox_line ON outbox (webhook_id, ordering_key, seq)",
                """
                CREATE TABLE deliveries (
                    seq BIGSERIAL PRIMARY KEY,
                    webhook_id TEXT NOT NULL,
                    message_id TEXT NOT NULL,
                    attempt INTEGER NOT NULL,
                    attempted_at BIGINT NOT NULL,
                    status_code INTEGER,
                    error TEXT,
                    next_retry_at BIGINT,
                    outcome TEXT NOT NULL
                )
                """,
                "CREATE INDEX deliveries_webhook ON deliveries (webhook_id, seq)",
            ]
        ),
        (
            "v2: webhook options (format, routing)",
            [
                "ALTER TABLE webhooks ADD COLUMN options TEXT NOT NULL DEFAULT '{}'"
            ]
        ),
        (
            "v3: silences",
            [
                """
                CREATE TABLE silences (
                    id TEXT PRIMARY KEY,
                    matchers TEXT NOT NULL,
                    starts_at BIGINT NOT NULL,
                    ends_at BIGINT NOT NULL,
                    comment TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    released BOOLEAN NOT NULL DEFAULT FALSE
                )
                """
            ]
        ),
        (
            "v4: fleet history",
            [
                """
                CREATE TABLE fleet_history (
                    resolution TEXT NOT NULL,
                    app_id TEXT NOT NULL,
                    container_id TEXT NOT NULL,
                    at BIGINT NOT NULL,
                    counts TEXT NOT NULL,
                    PRIMARY KEY (resolution, app_id, container_id, at)
                )
                """,
                "CREATE INDEX fleet_history_age ON fleet_history (resolution, at)",
            ]
        ),
        (
            "v5: one round trip a read and a write; counters sharded per replica; device versions",
            [
                "ALTER TABLE devices ADD COLUMN version BIGINT NOT NULL DEFAULT 1",
                "ALTER TABLE fleet_counters ADD COLUMN shard BIGINT NOT NULL DEFAULT 0",
                "ALTER TABLE fleet_counters DROP CONSTRAINT fleet_counters_pkey",
                "ALTER TABLE fleet_counters ADD PRIMARY KEY (shard, app_id, container_id, field)",
                "CREATE INDEX fleet_counters_scope ON fleet_counters (app_id, container_id)",
                "CREATE TABLE replicas (shard BIGINT PRIMARY KEY, seen_at BIGINT NOT NULL)",
                PostgresQuery(unsafeSQL: PostgresGroupSQL.readFunction),
                PostgresQuery(unsafeSQL: PostgresGroupSQL.writeFunction),
            ]
        ),
        (
            "v6: write first (event ids guarded), deadlines that only move earlier, room for in-place updates",
            [
                PostgresQuery(unsafeSQL: PostgresGroupSQL.dropWriteFunctionV5),
                PostgresQuery(unsafeSQL: PostgresGroupSQL.writeFunctionV6),
                "ALTER TABLE devices SET (fillfactor = 70)",
            ]
        ),
        (
            // Keyed by the device first, every event is inserted at a random leaf of an index as large as the
            // window. Id first, ids that grow with time are inserted at the right edge, and expiry deletes from the
            // left (docs/benchmarks-log.md#a-weeks-window-on-postgresql).
            "v7: event ids keyed id first",
            [
                "ALTER TABLE seen_events DROP CONSTRAINT seen_events_pkey",
                "ALTER TABLE seen_events ADD PRIMARY KEY (event_id, device_hash)",
            ]
        ),
        (
            // One open incident a key at most: the partial unique index refuses a second one.
            "v8: incidents; migrations say whether the release before can run on them",
            [
                "ALTER TABLE synchealth_migrations ADD COLUMN additive BOOLEAN NOT NULL DEFAULT FALSE",
                """
                CREATE TABLE incidents (
                    seq BIGSERIAL PRIMARY KEY,
                    id TEXT NOT NULL UNIQUE,
                    incident_key TEXT NOT NULL,
                    app_id TEXT NOT NULL,
                    container_id TEXT,
                    kind TEXT NOT NULL,
                    error_domain TEXT,
                    error_code BIGINT,
                    state TEXT NOT NULL,
                    opened_at BIGINT NOT NULL,
                    resolved_at BIGINT,
                    devices BIGINT NOT NULL,
                    peak_devices BIGINT NOT NULL,
                    by_version TEXT NOT NULL,
                    samples TEXT NOT NULL,
                    notified_at BIGINT,
                    notified_devices BIGINT NOT NULL,
                    messages BIGINT NOT NULL,
                    revision BIGINT NOT NULL
                )
                """,
                "CREATE UNIQUE INDEX incidents_open_key ON incidents (incident_key) WHERE state = 'open'",
                "CREATE INDEX incidents_state ON incidents (state, seq)",
            ]
        ),
        (
            // Additive: v6's write function stays for replicas of the release before; this one is an overload.
            "v9: removing devices (retention and erasure), and old history; why an alert resolved",
            [
                "ALTER TABLE alerts ADD COLUMN reason TEXT",
                "CREATE INDEX alerts_device ON alerts (app_id, device_id)",
                "CREATE INDEX alerts_ended ON alerts (ends_at) WHERE state = 'resolved'",
                PostgresQuery(unsafeSQL: PostgresGroupSQL.writeFunctionV9),
            ]
        ),
        (
            "v10: alert transitions told to every replica (LISTEN synchealth_transitions)",
            PostgresGroupSQL.transitionTrigger.map { PostgresQuery(unsafeSQL: $0) }
        ),
        (
            // The index lets one `releaseRegression` alert fire per release, whichever replica tries.
            "v11: release regression alerts",
            [
                "ALTER TABLE alerts ADD COLUMN app_version TEXT",
                """
                CREATE UNIQUE INDEX alerts_release_firing ON alerts (app_id, app_version)
                    WHERE kind = 'releaseRegression' AND state = 'firing'
                """,
            ]
        ),
        (
            "v12: flapping incidents, and each incident's count over time",
            [
                "ALTER TABLE incidents ADD COLUMN flapping_since BIGINT",
                "ALTER TABLE incidents ADD COLUMN quiet_since BIGINT",
                "ALTER TABLE incidents ADD COLUMN history TEXT",
            ]
        ),
        (
            "v13: API keys and the audit log",
            [
                """
                CREATE TABLE api_keys (
                    id TEXT PRIMARY KEY,
                    role TEXT NOT NULL,
                    app_ids TEXT,
                    description TEXT NOT NULL,
                    secret_digest BYTEA NOT NULL,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT,
                    revoked_at BIGINT,
                    last_used_at BIGINT,
                    created_by TEXT NOT NULL
                )
                """,
                """
                CREATE TABLE audit_log (
                    seq BIGSERIAL PRIMARY KEY,
                    at BIGINT NOT NULL,
                    key_id TEXT NOT NULL,
                    action TEXT NOT NULL,
                    target TEXT NOT NULL,
                    address TEXT NOT NULL
                )
                """,
            ]
        ),
        (
            "v14: App Attest's challenges and the devices' attested keys",
            [
                """
                CREATE TABLE attest_challenges (
                    challenge BYTEA PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    expires_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE device_attestations (
                    key_id BYTEA PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    public_key BYTEA NOT NULL,
                    environment TEXT NOT NULL,
                    receipt BYTEA NOT NULL,
                    counter BIGINT NOT NULL,
                    attested_at BIGINT NOT NULL
                )
                """,
                "CREATE UNIQUE INDEX device_attestations_device ON device_attestations (app_id, device_id)",
            ]
        ),
        (
            "v15: the app version of each attested device's last signed upload",
            ["ALTER TABLE device_attestations ADD COLUMN app_version TEXT"]
        ),
        (
            "v16: incidents of attested devices only",
            ["ALTER TABLE incidents ADD COLUMN attested_only BOOLEAN NOT NULL DEFAULT false"]
        ),
        (
            // Additive: the same function and effects, with look-ups no cached plan makes a table scan.
            "v17: the group write probes devices by key whatever the statistics",
            [PostgresQuery(unsafeSQL: PostgresGroupSQL.writeFunctionV17)]
        ),
        (
            "v18: device tokens' secrets, and the attested keys revoked",
            [
                "CREATE TABLE device_token_secrets (id BYTEA PRIMARY KEY, secret BYTEA NOT NULL, created_at BIGINT NOT NULL)",
                """
                CREATE TABLE attestation_revocations (
                    seq BIGSERIAL PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    key_id BYTEA NOT NULL,
                    revoked_at BIGINT NOT NULL
                )
                """,
            ]
        ),
        (
            // A trigger, so that keys made or revoked by a replica of the release before are numbered too; the
            // counter's row lock makes the numbers' order the commits' order, so a replica that has seen a number has
            // seen every smaller one (docs/security.md#api-keys).
            "v19: the key table's changes in order, and keys paged by age",
            [
                "CREATE TABLE api_key_changes (id INTEGER PRIMARY KEY CHECK (id = 1), seq BIGINT NOT NULL)",
                "INSERT INTO api_key_changes (id, seq) VALUES (1, 1)",
                "ALTER TABLE api_keys ADD COLUMN change_seq BIGINT NOT NULL DEFAULT 1",
                "CREATE INDEX api_keys_change_seq ON api_keys (change_seq)",
                "CREATE INDEX api_keys_age ON api_keys (created_at, id)",
                """
                CREATE FUNCTION synchealth_api_key_changed() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    UPDATE api_key_changes SET seq = seq + 1 WHERE id = 1 RETURNING seq INTO NEW.change_seq;
                    RETURN NEW;
                END
                $$
                """,
                """
                CREATE TRIGGER api_keys_changed BEFORE INSERT OR UPDATE OF revoked_at ON api_keys
                FOR EACH ROW EXECUTE FUNCTION synchealth_api_key_changed()
                """,
            ]
        ),
    ]

    /// The migrations a replica of the release before runs on unchanged (they only add): recorded with each
    /// migration, so that a replica that does not know a migration can tell whether it may start on the schema
    /// (docs/operations.md, "Upgrading"). Every migration from v8 on that only adds belongs here.
    static let additive: Set<Int> = [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]

    /// Applies the missing migrations, one replica at a time (under a transaction-scoped advisory lock). A database
    /// that a newer release has migrated is used if every migration this release does not know only adds (a
    /// rolling upgrade), and refused otherwise.
    func migrate() async throws {
        try await withTransaction { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(Self.migrationLockKey))", logger: logger)
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS synchealth_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)
                """,
                logger: logger
            )
            var applied = 0
            for try await version in try await connection.query("SELECT COALESCE(MAX(version), 0) FROM synchealth_migrations", logger: logger)
                .decode(Int.self)
            {
                applied = version
            }
            if applied > Self.migrations.count {
                var additive = false
                for try await all in try await connection.query(
                    "SELECT bool_and(additive) FROM synchealth_migrations WHERE version > \(Self.migrations.count)",
                    logger: logger
                ).decode(Bool?.self) {
                    additive = all ?? false
                }
                guard additive else { throw StoreError.newerSchema(path: self.displayName) }
                logger.warning(
                    "A newer release has migrated the database; this replica runs on it until it is replaced",
                    metadata: ["schema.version": "\(applied)", "schema.known": "\(Self.migrations.count)"]
                )
                return
            }
            for (index, migration) in Self.migrations.enumerated() where index + 1 > applied {
                for statement in migration.statements { try await connection.query(statement, logger: logger) }
                // `additive` exists from v8 on; the rows before stay false.
                if index + 1 >= 8 {
                    try await connection.query(
                        """
                        INSERT INTO synchealth_migrations (version, name, additive)
                        VALUES (\(index + 1), \(migration.name), \(Self.additive.contains(index + 1)))
                        """,
                        logger: logger
                    )
                } else {
                    try await connection.query(
                        "INSERT INTO synchealth_migrations (version, name) VALUES (\(index + 1), \(migration.name))",
                        logger: logger
                    )
                }
            }
        }
    }

    /// The advisory lock that serializes migrations ("synchealth" in ASCII, truncated).
    static let migrationLockKey: Int64 = 0x7379_6e63_6865_616c
}
