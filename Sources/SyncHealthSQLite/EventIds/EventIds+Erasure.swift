import GRDB
import SyncHealthStore
import Synchronization

extension EventIds {
    /// Takes the removed devices' ids out of dedupe (`DeviceRemoval`), after the ids of the entries before them
    /// are recorded.
    ///
    /// Each device loses its ceiling, so its next ids are judged new without a read. A forgotten device's ids
    /// have aged out of the window already (retention is months, the window a week), or soon will. An erased
    /// device's ids are deleted: the generation that takes ids now is closed at `at`, so that the ids the device
    /// sends later go into a newer one, and the device is listed in `erased_event_ids` with the newest generation
    /// that holds its ids. `sweepErased` deletes them there, between folds: the table is keyed by generation and id,
    /// so finding one device's ids reads all of it, which a fold must not wait for.
    static func forget(_ removals: [DeviceRemoval], at: Int64, _ db: Database) throws {
        let dropCeiling = try FastStatement(db, "DELETE FROM event_id_ceilings WHERE device_hash = ?")
        for removal in removals { try dropCeiling.run(.int(removal.key.stableHash)) }
        let erased = removals.filter { $0.reason == .erased }
        guard !erased.isEmpty, let current = try generations(db).last else { return }
        if current.endsAt > at {
            try db.execute(sql: "UPDATE event_id_generations SET ends_at = ? WHERE gen = ?", arguments: [at, current.gen])
        }
        let list = try FastStatement(
            db,
            """
            INSERT INTO erased_event_ids (device_hash, through_gen) VALUES (?, ?)
            ON CONFLICT (device_hash) DO UPDATE SET through_gen = excluded.through_gen
            """
        )
        for removal in erased { try list.run(.int(removal.key.stableHash), .int(current.gen)) }
    }

    /// A pass of `sweepErased` over `event_ids`.
    struct ErasureSweep: Sendable {
        /// The erasures the pass deletes ids for: each device's hash, and the newest generation with its ids.
        var through: [Int64: Int64]
        /// The last key the pass looked at.
        var after: (gen: Int64, id: [UInt8], hash: Int64)?
    }

    /// Looks at up to `limit` ids of the generations that erased devices have ids in, in key order from where
    /// `sweep` stopped, and deletes those of the erased devices. A pass covers the erasures listed when it
    /// started; once it has looked at every id it unlists them. Returns how many ids it deleted, and whether
    /// erasures are still listed.
    static func sweepErased(_ sweep: inout ErasureSweep?, limit: Int, _ db: Database) throws -> (deleted: Int, pending: Bool) {
        if sweep == nil {
            var through: [Int64: Int64] = [:]
            let select = try FastStatement(db, "SELECT device_hash, through_gen FROM erased_event_ids")
            try select.query { row in through[row.int(0)] = row.int(1) }
            if through.isEmpty { return (0, false) }
            sweep = ErasureSweep(through: through)
        }
        guard var pass = sweep, let newest = pass.through.values.max() else { return (0, false) }
        var keys: [(gen: Int64, id: [UInt8], hash: Int64)] = []
        let collect: (FastStatement.Columns) -> Void = { row in keys.append((row.int(0), row.bytes(1), row.int(2))) }
        if let after = pass.after {
            let select = try FastStatement(
                db,
                """
                SELECT gen, id, device_hash FROM event_ids WHERE (gen, id, device_hash) > (?, ?, ?) AND gen <= ?
                ORDER BY gen, id, device_hash LIMIT ?
                """
            )
            try select.query(.int(after.gen), .blob(after.id), .int(after.hash), .int(newest), .int(Int64(limit)), row: collect)
        } else {
            let select = try FastStatement(
                db,
                "SELECT gen, id, device_hash FROM event_ids WHERE gen <= ? ORDER BY gen, id, device_hash LIMIT ?"
            )
            try select.query(.int(newest), .int(Int64(limit)), row: collect)
        }
        let delete = try FastStatement(db, "DELETE FROM event_ids WHERE gen = ? AND id = ? AND device_hash = ?")
        var deleted = 0
        for key in keys {
            guard let through = pass.through[key.hash], key.gen <= through else { continue }
            try delete.run(.int(key.gen), .blob(key.id), .int(key.hash))
            deleted += 1
        }
        if keys.count == limit, let last = keys.last {
            pass.after = last
            sweep = pass
            return (deleted, true)
        }
        // Every id looked at: the erasures of this pass are done, unless one was erased again meanwhile.
        let unlist = try FastStatement(db, "DELETE FROM erased_event_ids WHERE device_hash = ? AND through_gen = ?")
        for (hash, gen) in pass.through { try unlist.run(.int(hash), .int(gen)) }
        sweep = nil
        let left = try Int.fetchOne(db, sql: "SELECT count(*) FROM erased_event_ids") ?? 0
        return (deleted, left > 0)
    }
}

extension SQLiteStore {
    /// How many ids a step of the erasure sweep looks at: about 20 ms of the writer's time.
    public static let erasureSweepStep = 50_000

    /// One step of deleting erased devices' event ids (`EventIds.sweepErased`), when any are listed. The
    /// maintenance service runs it between folds; returns whether more steps are needed.
    @discardableResult
    public func sweepErasedEventIds(limit: Int = SQLiteStore.erasureSweepStep) async throws -> Bool {
        guard erasuresPending.load(ordering: .acquiring) else { return false }
        let pending = try await pool.write { db in
            try self.erasureSweep.withLock { sweep in try EventIds.sweepErased(&sweep, limit: limit, db).pending }
        }
        if !pending { erasuresPending.store(false, ordering: .releasing) }
        return pending
    }
}
