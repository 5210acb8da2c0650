import GRDB
import SyncHealthStore

extension SQLiteStore {
    /// The schema, as append-only migrations. Never edit a migration that has shipped: add a new one.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: devices, event ids, alerts") { db in
            try db.execute(
                sql: """
                    CREATE TABLE devices (
                        seq INTEGER PRIMARY KEY,
                        app_id TEXT NOT NULL,
                        device_id TEXT NOT NULL,
                        state BLOB NOT NULL,
                        UNIQUE (app_id, device_id)
                    );
                    CREATE TABLE seen_events (
                        device_hash INTEGER NOT NULL,
                        event_id TEXT NOT NULL,
                        recorded_at INTEGER NOT NULL,
                        PRIMARY KEY (device_hash, event_id)
                    ) WITHOUT ROWID;
                    CREATE INDEX seen_events_recorded_at ON seen_events (recorded_at);
                    CREATE TABLE alerts (
                        seq INTEGER PRIMARY KEY,
                        id TEXT NOT NULL UNIQUE,
                        kind TEXT NOT NULL,
                        state TEXT NOT NULL,
                        app_id TEXT,
                        device_id TEXT,
                        container_id TEXT,
                        starts_at INTEGER NOT NULL,
                        ends_at INTEGER,
                        summary TEXT NOT NULL,
                        detail TEXT NOT NULL
                    );
                    CREATE INDEX alerts_state_seq ON alerts (state, seq);
                    CREATE TABLE fleet_alerts (
                        container_id TEXT PRIMARY KEY,
                        starts_at INTEGER NOT NULL
                    );
                    """
            )
        }
        migrator.registerMigration("v2: webhooks, outbox, delivery log") { db in
            try db.execute(
                sql: """
                    CREATE TABLE webhooks (
                        id TEXT PRIMARY KEY,
                        url TEXT NOT NULL,
                        kinds TEXT NOT NULL,
                        description TEXT,
                        secret TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        disabled_reason TEXT
                    );
                    CREATE TABLE outbox (
                        seq INTEGER PRIMARY KEY,
                        id TEXT NOT NULL UNIQUE,
                        webhook_id TEXT NOT NULL,
                        ordering_key TEXT NOT NULL,
                        payload TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        attempts INTEGER NOT NULL,
                        next_attempt_at INTEGER NOT NULL,
                        state TEXT NOT NULL
                    );
                    CREATE INDEX outbox_due ON outbox (state, next_attempt_at);
                    CREATE INDEX outbox_line ON outbox (webhook_id, ordering_key, seq);
                    CREATE TABLE deliveries (
                        seq INTEGER PRIMARY KEY,
                        webhook_id TEXT NOT NULL,
                        message_id TEXT NOT NULL,
                        attempt INTEGER NOT NULL,
                        attempted_at INTEGER NOT NULL,
                        status_code INTEGER,
                        error TEXT,
                        next_retry_at INTEGER,
                        outcome TEXT NOT NULL
                    );
                    CREATE INDEX deliveries_webhook ON deliveries (webhook_id, seq);
                    """
            )
        }
        migrator.registerMigration("v3: event ids expire through a log per commit, not an index") { db in
            // The log replaced an index on `seen_events.recorded_at` for expiring ids. v4 drops both `seen_events` and
            // the log, and reads the ids from `seen_events`, so an upgrade no longer fills the log here.
            try db.execute(
                sql: """
                    CREATE TABLE event_id_log (
                        seq INTEGER PRIMARY KEY,
                        recorded_at INTEGER NOT NULL,
                        ids BLOB NOT NULL
                    );
                    """
            )
            try db.execute(sql: "DROP INDEX seen_events_recorded_at")
        }
        migrator.registerMigration("v4: event ids in buckets, a row per bucket of a device's ids") { db in
            // See `EventIdBuckets`. The ids of `seen_events` move into buckets with their times; the table and the
            // expiry log of v3 go.
            try db.execute(
                sql: """
                    CREATE TABLE event_id_buckets (
                        seq INTEGER PRIMARY KEY,
                        device_hash INTEGER NOT NULL,
                        lo BLOB NOT NULL,
                        oldest INTEGER NOT NULL,
                        entries BLOB NOT NULL
                    );
                    CREATE UNIQUE INDEX event_id_buckets_device ON event_id_buckets (device_hash, lo);
                    """
            )
            try MigrationV4.run(db)
            try db.execute(
                sql: """
                    CREATE INDEX event_id_buckets_oldest ON event_id_buckets (oldest);
                    DROP TABLE seen_events;
                    DROP TABLE event_id_log;
                    """
            )
        }
        migrator.registerMigration("v5: commits reach the tables through a journal") { db in
            // See `CommitJournal`: the journal's records up to `folded_through` are in the tables.
            try db.execute(
                sql: """
                    CREATE TABLE journal_state (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        folded_through INTEGER NOT NULL
                    );
                    INSERT INTO journal_state (id, folded_through) VALUES (1, 0);
                    """
            )
        }
        migrator.registerMigration("v6: webhook options (format, routing)") { db in
            try db.execute(sql: "ALTER TABLE webhooks ADD COLUMN options TEXT NOT NULL DEFAULT '{}'")
        }
        migrator.registerMigration("v7: silences") { db in
            try db.execute(
                sql: """
                    CREATE TABLE silences (
                        id TEXT PRIMARY KEY,
                        matchers TEXT NOT NULL,
                        starts_at INTEGER NOT NULL,
                        ends_at INTEGER NOT NULL,
                        comment TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        released INTEGER NOT NULL DEFAULT 0
                    )
                    """
            )
        }
        migrator.registerMigration("v8: fleet history") { db in
            // The scope's empty string stands for "any", as in the counters.
            try db.execute(
                sql: """
                    CREATE TABLE fleet_history (
                        resolution TEXT NOT NULL,
                        app_id TEXT NOT NULL,
                        container_id TEXT NOT NULL,
                        at INTEGER NOT NULL,
                        counts TEXT NOT NULL,
                        PRIMARY KEY (resolution, app_id, container_id, at)
                    ) WITHOUT ROWID;
                    CREATE INDEX fleet_history_age ON fleet_history (resolution, at);
                    """
            )
        }
        migrator.registerMigration("v9: each device's newest event ids in a tail, in front of its buckets") { db in
            // See `EventIdTails`. Every device with buckets gets an empty tail that knows the highest id in them.
            try db.execute(
                sql: """
                    CREATE TABLE event_id_tails (
                        device_hash INTEGER PRIMARY KEY,
                        entries BLOB NOT NULL,
                        oldest INTEGER,
                        buckets_through BLOB
                    );
                    CREATE INDEX event_id_tails_oldest ON event_id_tails (oldest) WHERE oldest IS NOT NULL;
                    """
            )
            try MigrationV9.run(db)
        }
        migrator.registerMigration("v10: event ids by generation, one row each, and each device's ceiling") { db in
            // See `EventIds`. The ids of the tails and buckets move to generations by the day they were recorded.
            try db.execute(
                sql: """
                    CREATE TABLE event_id_generations (
                        gen INTEGER PRIMARY KEY,
                        ends_at INTEGER NOT NULL
                    );
                    CREATE TABLE event_ids (
                        gen INTEGER NOT NULL,
                        id BLOB NOT NULL,
                        device_hash INTEGER NOT NULL,
                        PRIMARY KEY (gen, id, device_hash)
                    ) WITHOUT ROWID;
                    CREATE TABLE event_id_ceilings (
                        device_hash INTEGER PRIMARY KEY,
                        through BLOB NOT NULL
                    );
                    """
            )
            try MigrationV10.run(db)
            try db.execute(
                sql: """
                    DROP TABLE event_id_tails;
                    DROP TABLE event_id_buckets;
                    """
            )
        }
        migrator.registerMigration("v11: incidents") { db in
            // One open incident a key at most: the partial unique index refuses a second one.
            try db.execute(
                sql: """
                    CREATE TABLE incidents (
                        seq INTEGER PRIMARY KEY,
                        id TEXT NOT NULL UNIQUE,
                        incident_key TEXT NOT NULL,
                        app_id TEXT NOT NULL,
                        container_id TEXT,
                        kind TEXT NOT NULL,
                        error_domain TEXT,
                        error_code INTEGER,
                        state TEXT NOT NULL,
                        opened_at INTEGER NOT NULL,
                        resolved_at INTEGER,
                        devices INTEGER NOT NULL,
                        peak_devices INTEGER NOT NULL,
                        by_version TEXT NOT NULL,
                        samples TEXT NOT NULL,
                        notified_at INTEGER,
                        notified_devices INTEGER NOT NULL,
                        messages INTEGER NOT NULL,
                        revision INTEGER NOT NULL
                    );
                    CREATE UNIQUE INDEX incidents_open_key ON incidents (incident_key) WHERE state = 'open';
                    CREATE INDEX incidents_state ON incidents (state, seq);
                    """
            )
        }
        migrator.registerMigration("v12: removing devices (retention and erasure), and old history") { db in
            // `reason`: why an alert resolved when its condition did not end (a forgotten device). The indexes find
            // an erased device's alerts, and resolved alerts by age for the history's retention; `erased_event_ids` lists erased devices whose ids the sweep has still to
            // delete, with the newest generation that holds them.
            try db.execute(
                sql: """
                    ALTER TABLE alerts ADD COLUMN reason TEXT;
                    CREATE INDEX alerts_device ON alerts (app_id, device_id);
                    CREATE INDEX alerts_ended ON alerts (ends_at) WHERE state = 'resolved';
                    CREATE TABLE erased_event_ids (
                        device_hash INTEGER PRIMARY KEY,
                        through_gen INTEGER NOT NULL
                    );
                    """
            )
        }
        migrator.registerMigration("v13: release regression alerts") { db in
            // `app_version`: the release of a `releaseRegression` alert. The index lets one such alert fire per
            // release, whichever writer tries.
            try db.execute(
                sql: """
                    ALTER TABLE alerts ADD COLUMN app_version TEXT;
                    CREATE UNIQUE INDEX alerts_release_firing ON alerts (app_id, app_version)
                        WHERE kind = 'releaseRegression' AND state = 'firing';
                    """
            )
        }
        migrator.registerMigration("v14: flapping incidents, and each incident's count over time") { db in
            try db.execute(
                sql: """
                    ALTER TABLE incidents ADD COLUMN flapping_since INTEGER;
                    ALTER TABLE incidents ADD COLUMN quiet_since INTEGER;
                    ALTER TABLE incidents ADD COLUMN history TEXT;
                    """
            )
        }
        migrator.registerMigration("v15: event-id ceilings in device rows") { db in
            // The fold rewrites a device's row for each of its events; a ceiling in a table of its own cost a
            // second page for nearly every event at a million devices (docs/architecture.md#event-ids-by-generation).
            try MigrationV15.run(db)
        }
        migrator.registerMigration("v16: API keys and the audit log") { db in
            // A key's secret is never stored: its SHA-256 digest only.
            try db.execute(
                sql: """
                    CREATE TABLE api_keys (
                        id TEXT PRIMARY KEY,
                        role TEXT NOT NULL,
                        app_ids TEXT,
                        description TEXT NOT NULL,
                        secret_digest BLOB NOT NULL,
                        created_at INTEGER NOT NULL,
                        expires_at INTEGER,
                        revoked_at INTEGER,
                        last_used_at INTEGER,
                        created_by TEXT NOT NULL
                    );
                    CREATE TABLE audit_log (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        at INTEGER NOT NULL,
                        key_id TEXT NOT NULL,
                        action TEXT NOT NULL,
                        target TEXT NOT NULL,
                        address TEXT NOT NULL
                    );
                    """
            )
        }
        migrator.registerMigration("v17: App Attest's challenges and the devices' attested keys") { db in
            try db.execute(
                sql: """
                    CREATE TABLE attest_challenges (
                        challenge BLOB PRIMARY KEY,
                        app_id TEXT NOT NULL,
                        expires_at INTEGER NOT NULL
                    );
                    CREATE TABLE device_attestations (
                        key_id BLOB PRIMARY KEY,
                        app_id TEXT NOT NULL,
                        device_id TEXT NOT NULL,
                        public_key BLOB NOT NULL,
                        environment TEXT NOT NULL,
                        receipt BLOB NOT NULL,
                        counter INTEGER NOT NULL,
                        attested_at INTEGER NOT NULL
                    );
                    CREATE UNIQUE INDEX device_attestations_device ON device_attestations (app_id, device_id);
                    """
            )
        }
        migrator.registerMigration("v18: the app version of each attested device's last signed upload") { db in
            try db.execute(sql: "ALTER TABLE device_attestations ADD COLUMN app_version TEXT")
        }
        migrator.registerMigration("v19: incidents of attested devices only") { db in
            try db.execute(sql: "ALTER TABLE incidents ADD COLUMN attested_only INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v20: device tokens' secrets, and the attested keys revoked") { db in
            try db.execute(
                sql: """
                    CREATE TABLE device_token_secrets (
                        id BLOB PRIMARY KEY,
                        secret BLOB NOT NULL,
                        created_at INTEGER NOT NULL
                    );
                    CREATE TABLE attestation_revocations (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        app_id TEXT NOT NULL,
                        key_id BLOB NOT NULL,
                        revoked_at INTEGER NOT NULL
                    );
                    """
            )
        }
        migrator.registerMigration("v21: the key table's changes in order, and keys paged by age") { db in
            // Each creation or revocation takes the next number, so that a replica reads only the keys changed since
            // its last read (docs/security.md#api-keys); a counter of its own, because pruned keys take their
            // numbers with them.
            try db.execute(
                sql: """
                    CREATE TABLE api_key_changes (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL);
                    INSERT INTO api_key_changes (id, seq) VALUES (1, 1);
                    ALTER TABLE api_keys ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 1;
                    CREATE INDEX api_keys_change_seq ON api_keys (change_seq);
                    CREATE INDEX api_keys_age ON api_keys (created_at, id);
                    CREATE TRIGGER api_keys_inserted AFTER INSERT ON api_keys BEGIN
                        UPDATE api_key_changes SET seq = seq + 1;
                        UPDATE api_keys SET change_seq = (SELECT seq FROM api_key_changes) WHERE id = NEW.id;
                    END;
                    CREATE TRIGGER api_keys_revoked AFTER UPDATE OF revoked_at ON api_keys BEGIN
                        UPDATE api_key_changes SET seq = seq + 1;
                        UPDATE api_keys SET change_seq = (SELECT seq FROM api_key_changes) WHERE id = NEW.id;
                    END;
                    """
            )
        }
        return migrator
    }
}
