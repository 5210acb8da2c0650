import GRDB
import SyncHealthCore

@testable import SyncHealthSQLite
@testable import SyncHealthStore

/// Opens a database directly, to damage it in tests.
struct GRDBTestHelper {
    let queue: DatabaseQueue
    static func open(_ path: String) throws -> GRDBTestHelper { GRDBTestHelper(queue: try DatabaseQueue(path: path)) }
    func execute(_ sql: String) throws { try queue.write { try $0.execute(sql: sql) } }
}

/// Builds a store file as an older version left it: migrated up to `migration`, with event ids in `seen_events`,
/// one row each (migrations v1-v3).
func oldStore(in dir: String, upTo migration: String, eventIds: [(key: DeviceKey, id: String, at: Timestamp)]) async throws {
    let old = try DatabaseQueue(path: dir + "/synchealth.sqlite")
    try SQLiteStore.migrator.migrate(old, upTo: migration)
    try await old.write { db in
        for row in eventIds {
            try db.execute(
                sql: "INSERT INTO seen_events (device_hash, event_id, recorded_at) VALUES (?, ?, ?)",
                arguments: [row.key.stableHash, row.id, row.at.microseconds]
            )
        }
    }
    try old.close()
}
