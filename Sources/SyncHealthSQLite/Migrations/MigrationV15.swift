import GRDB
import SyncHealthStore

/// Migration v15's move of event-id ceilings into device rows, frozen (see `MigrationV4` for why a copy): each
/// row of `event_id_ceilings` whose hash is a stored device's goes to that device's `id_ceiling`; the rest (ids
/// recorded for keys without a row) stay where they are.
enum MigrationV15 {
    static func run(_ db: Database) throws {
        let hash = DatabaseFunction("migration_v15_hash", argumentCount: 2, pure: true) { values in
            guard let appId = String.fromDatabaseValue(values[0]), let deviceId = String.fromDatabaseValue(values[1]) else {
                return nil
            }
            return Self.stableHash(appId: appId, deviceId: deviceId)
        }
        db.add(function: hash)
        defer { db.remove(function: hash) }
        try db.execute(
            sql: """
                ALTER TABLE devices ADD COLUMN id_ceiling BLOB;
                UPDATE devices SET id_ceiling = (
                    SELECT through FROM event_id_ceilings WHERE device_hash = migration_v15_hash(devices.app_id, devices.device_id)
                );
                DELETE FROM event_id_ceilings WHERE device_hash IN (SELECT migration_v15_hash(app_id, device_id) FROM devices);
                """
        )
    }

    /// `DeviceKey.stableHash` as v10-v14 keyed ceilings by it: FNV-1a over the app id, a 0xFF byte, the device id.
    static func stableHash(appId: String, deviceId: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in appId.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        hash = (hash ^ 0xFF) &* 0x0000_0100_0000_01B3
        for byte in deviceId.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return Int64(bitPattern: hash)
    }
}
