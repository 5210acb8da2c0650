import Foundation
import GRDB
import SyncHealthCore
public import SyncHealthStore
import Synchronization

extension SQLiteStore {
    public func loadState() async throws -> PersistedState {
        try await fold()
        guard commitPath == .journal else { return try await pool.read { db in try Self.state(db, ceilings: false).state } }
        // Every device's ceiling along with its state, so that a restarted store judges a device's next claim
        // without a read, as the process before it did. On the journal's queue, where every append runs, with
        // the backlog looked at before the tables, as a claim's first read does (`EventIdCeilings`).
        return try await journal.perform { _ in
            let backlogged = self.backlog.withLock { $0.highestIds() }
            let (state, ceilings) = try self.pool.read { db in try Self.state(db, ceilings: true) }
            self.backlog.withLock { b in
                b.ceilings.reserveCapacity(ceilings.count)
                for (hash, ceiling) in ceilings { b.ceilings.set(hash, max(ceiling, backlogged[hash] ?? .zero)) }
            }
            return state
        }
    }

    /// The devices, in the order they were created, and the fleet alerts; with `ceilings`, also the ceilings of
    /// event ids in the tables, by device hash (`EventIds`): a hash may come twice, and its ceiling is the higher.
    fileprivate static func state(
        _ db: Database,
        ceilings withCeilings: Bool
    ) throws -> (state: PersistedState, ceilings: [(hash: Int64, ceiling: EventIdCeilings.Prefix)]) {
        var devices: [DeviceRecord] = []
        var ceilings = withCeilings ? try EventIds.ceilingsApart(db) : []
        let rows = try Row.fetchCursor(db, sql: "SELECT app_id, device_id, state, id_ceiling FROM devices ORDER BY seq")
        while let row = try rows.next() {
            let key = DeviceKey(appId: row[0], deviceId: row[1])
            let blob: Data = row[2]
            do {
                devices.append(try DeviceRecord(key: key, binary: [UInt8](blob)))
            } catch {
                throw StoreError.undecodableRecord("device \(key)")
            }
            if withCeilings {
                // No ceiling in the row: the device recorded no id, or only under its hash (`ceilingsApart`).
                let bytes: Data? = row[3]
                ceilings.append((key.stableHash, bytes.map { EventIdCeilings.Prefix($0) } ?? .zero))
            }
        }
        var fleet: [String: Timestamp] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT container_id, starts_at FROM fleet_alerts") {
            fleet[row[0]] = Timestamp(microseconds: row[1])
        }
        return (PersistedState(devices: devices, fleetAlerts: fleet), ceilings)
    }
}
