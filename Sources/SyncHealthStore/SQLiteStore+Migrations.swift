import GRDB

extension SQLiteStore {
    /// The schema, as append-only migrations. Never edit a migration that has shipped: add a new one.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: devices, event ids, alerts") { db in
            try db.execute(sql: """
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
                """)
        }
        return migrator
    }
}
