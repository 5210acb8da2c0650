import GRDB
import Logging
import Metrics
import NIOPosix
import ServiceLifecycle
import SyncHealthCore
import SyncHealthStore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension JournalEntry {
    /// Writes `entries` into the tables, as if one after the other: each device's last record (new devices in the
    /// order they first appear) with its ceiling of event ids, every id once (in generations of `eventIdSpan`
    /// microseconds), alerts, fleet alerts and webhook messages in order, then the removals of each entry
    /// (`DeviceRemoval`).
    static func write(_ entries: [JournalEntry], eventIdSpan: Int64, _ db: Database) throws {
        // Each device's last record since it last left; a device that leaves and comes back in these entries is
        // deleted, then inserted again at the end of the list.
        var slot: [DeviceKey: Int] = [:]
        var devices: [(key: DeviceKey, state: [UInt8])?] = []
        var removed: [DeviceKey] = []
        for entry in entries {
            for d in entry.devices {
                let key = DeviceKey(appId: d.appId, deviceId: d.deviceId)
                if let s = slot[key] {
                    devices[s] = (key, d.state)
                } else {
                    slot[key] = devices.count
                    devices.append((key, d.state))
                }
            }
            for r in entry.removals {
                if let s = slot.removeValue(forKey: r.key) { devices[s] = nil }
                removed.append(r.key)
            }
        }
        if !removed.isEmpty {
            let delete = try FastStatement(db, "DELETE FROM devices WHERE app_id = ? AND device_id = ?")
            for key in removed { try delete.run(.text(key.appId), .text(key.deviceId)) }
        }

        // The ids of the entries up to each removal go in before it, so that the removal covers them and not the
        // ids of the entries after it. Each device's ceiling covers its ids since it last left: one that comes
        // back starts again.
        var highest: [Int64: EventIdCeilings.Prefix] = [:]
        var idsFrom = 0
        for (i, entry) in entries.enumerated() where !entry.removals.isEmpty || i == entries.count - 1 {
            let run = entries[idsFrom...i]
            idsFrom = i + 1
            if run.contains(where: { !$0.ids.isEmpty }) {
                let ids = run.lazy.flatMap { entry in entry.ids.lazy.map { (hash: $0.hash, id: $0.id, at: entry.recordedAt) } }
                try EventIds.record(ids, span: eventIdSpan, db)
                for (hash, id) in run.lazy.flatMap(\.ids) {
                    let prefix = EventIdCeilings.Prefix(id)
                    if highest[hash].map({ $0 < prefix }) ?? true { highest[hash] = prefix }
                }
            }
            if !entry.removals.isEmpty {
                try EventIds.forget(entry.removals, at: entry.recordedAt, db)
                for r in entry.removals { highest[r.key.stableHash] = nil }
            }
        }

        // The ceiling rides on the row the fold writes anyway; a row keeps its own when the entries record no id
        // of the device, or only lower ones.
        let upsertDevice = try FastStatement(
            db,
            """
            INSERT INTO devices (app_id, device_id, state, id_ceiling) VALUES (?, ?, ?, ?)
            ON CONFLICT (app_id, device_id) DO UPDATE SET state = excluded.state,
                id_ceiling = CASE WHEN id_ceiling IS NULL OR excluded.id_ceiling > id_ceiling THEN excluded.id_ceiling ELSE id_ceiling END
            """
        )
        var written: [Int64] = []
        for case let d? in devices {
            let hash = d.key.stableHash
            try upsertDevice.run(.text(d.key.appId), .text(d.key.deviceId), .blob(d.state), highest[hash].map { .blob($0.bytes) } ?? .null)
            written.append(hash)
        }
        // Only after every row: two keys of one hash (a 64-bit collision) both get the higher ceiling.
        for hash in written { highest[hash] = nil }
        if !highest.isEmpty { try EventIds.raiseCeilingsApart(highest, db) }

        let upsertAlert = try db.cachedStatement(
            sql: """
                INSERT INTO alerts (id, kind, state, app_id, device_id, container_id, starts_at, ends_at, summary, detail, reason)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET state = excluded.state, ends_at = excluded.ends_at,
                    summary = excluded.summary, detail = excluded.detail, reason = excluded.reason
                """
        )
        for entry in entries {
            for a in entry.alerts {
                try upsertAlert.execute(arguments: [
                    a.id, a.kind.rawValue, a.state.rawValue, a.appId, a.deviceId, a.containerId,
                    a.startsAt.microseconds, a.endsAt?.microseconds, a.summary, a.detail, a.reason?.rawValue,
                ])
            }
            for (container, startsAt) in entry.fleet {
                if let startsAt {
                    try db.execute(
                        sql: "INSERT OR REPLACE INTO fleet_alerts (container_id, starts_at) VALUES (?, ?)",
                        arguments: [container, startsAt.microseconds]
                    )
                } else {
                    try db.execute(sql: "DELETE FROM fleet_alerts WHERE container_id = ?", arguments: [container])
                }
            }
            try SQLiteStore.insertOutbox(entry.outbox, db)
            for removal in entry.removals where removal.reason == .erased {
                try db.execute(
                    sql: "DELETE FROM alerts WHERE app_id = ? AND device_id = ?",
                    arguments: [removal.key.appId, removal.key.deviceId]
                )
                for key in removal.orderingKeys {
                    try db.execute(sql: "DELETE FROM outbox WHERE ordering_key = ?", arguments: [key.storageKey])
                }
            }
        }
    }

    /// Whether the entry erases a device.
    var erases: Bool { removals.contains { $0.reason == .erased } }

    /// Whether the entry writes nothing.
    var isEmpty: Bool { devices.isEmpty && ids.isEmpty && alerts.isEmpty && fleet.isEmpty && outbox.isEmpty && removals.isEmpty }
}
