import GRDB
import GRDBSQLite
import SyncHealthCore
import SyncHealthStore

/// How the embedded store remembers event ids for dedupe: one row an id in `event_ids`, keyed by its generation,
/// then the id's bytes, then its device's hash; and per device, a ceiling that none of its ids is above, in the
/// device's row (`devices.id_ceiling`).
///
/// Why this shape (docs/architecture.md#event-ids-by-generation):
/// - **A fold writes pages in proportion to the ids it records.** Ids that grow with time (the client's UUIDv7)
///   go in at the right edge of the current generation, so a page written holds a hundred new ids. The per-device
///   rows of migrations v4-v9 (tails and buckets) rewrote a page for each device a fold touched: once every
///   device's row had filled, nearly every page of the table, each fold, and a week's load slowed down with them.
///   For the same reason the ceiling lives in the device's row, which the fold rewrites anyway: in a table of its
///   own (v10-v14), it cost a second page for nearly every event at a million devices.
/// - **Ids age out a generation at a time.** A generation takes the ids recorded from its first until `span`
///   later (`event_id_generations.ends_at`). Once all of it is older than the cutoff, expiry deletes its rows in
///   key order, so whole pages are freed and new ids reuse them: the file stops growing once the window is full.
///   An id is remembered at least the retention, and at most one span longer.
/// - **A lookup is a seek a generation** (the window holds retention / span + 1 of them: 8 for 7 days and a day),
///   and is made only for an id at or below its device's ceiling: a growing id is new without one.
///
/// Ids recorded for a key that has no row written with them (the store's contract allows it; the engine always
/// writes the device it records ids for) keep their ceiling in `event_id_ceilings`, by the key's hash, and a
/// device's ceiling is the higher of the two.
///
/// Ids that do not grow (random ones) still cost a seek and an insert each, at random places in the current
/// generation; nothing is worse for them than it was in the buckets.
enum EventIds {
    /// A claim as the tables key it: the device, its stable hash, and each id as its UTF-8 bytes.
    typealias Claim = (key: DeviceKey, hash: Int64, ids: [[UInt8]])

    /// One generation: its number (the first column of `event_ids`' key) and when it stops taking ids.
    struct Generation: Equatable {
        var gen: Int64
        /// Service clock, microseconds.
        var endsAt: Int64
    }

    /// Every generation, oldest first.
    static func generations(_ db: Database) throws -> [Generation] {
        let select = try FastStatement(db, "SELECT gen, ends_at FROM event_id_generations ORDER BY gen")
        var generations: [Generation] = []
        try select.query { row in generations.append(Generation(gen: row.int(0), endsAt: row.int(1))) }
        return generations
    }

    /// For each claimed id, whether it was recorded; and for each claim, its device's ceiling in the tables
    /// (`.zero` for a device without ids).
    static func recordedBefore(
        _ claims: [Claim],
        _ db: Database
    ) throws -> (recorded: [[Bool]], ceilings: [EventIdCeilings.Prefix]) {
        let inRow = try FastStatement(db, "SELECT id_ceiling FROM devices WHERE app_id = ? AND device_id = ? AND id_ceiling IS NOT NULL")
        let apart = try FastStatement(db, "SELECT through FROM event_id_ceilings WHERE device_hash = ?")
        let find = try FastStatement(db, "SELECT 1 FROM event_ids WHERE gen = ? AND id = ? AND device_hash = ?")
        var generations: [Generation]?
        var recorded: [[Bool]] = []
        recorded.reserveCapacity(claims.count)
        var ceilings: [EventIdCeilings.Prefix] = []
        ceilings.reserveCapacity(claims.count)
        for claim in claims {
            var through = EventIdCeilings.Prefix.zero
            let raise: (FastStatement.Columns) -> Void = { row in through = max(through, EventIdCeilings.Prefix(row.bytes(0))) }
            try inRow.query(.text(claim.key.appId), .text(claim.key.deviceId), row: raise)
            try apart.query(.int(claim.hash), row: raise)
            ceilings.append(through)
            var found: [Bool] = []
            found.reserveCapacity(claim.ids.count)
            for id in claim.ids {
                // Above the ceiling: above every id of the device, so not one of them.
                guard EventIdCeilings.Prefix(id) <= through else {
                    found.append(false)
                    continue
                }
                if generations == nil { generations = try Self.generations(db) }
                let hit = try (generations ?? []).contains { generation in
                    var row = false
                    try find.query(.int(generation.gen), .blob(id), .int(claim.hash)) { _ in row = true }
                    return row
                }
                found.append(hit)
            }
            recorded.append(found)
        }
        return (recorded, ceilings)
    }

    /// The ceilings kept apart from device rows (`event_id_ceilings`), with their device hashes.
    static func ceilingsApart(_ db: Database) throws -> [(hash: Int64, ceiling: EventIdCeilings.Prefix)] {
        let select = try FastStatement(db, "SELECT device_hash, through FROM event_id_ceilings")
        var ceilings: [(hash: Int64, ceiling: EventIdCeilings.Prefix)] = []
        try select.query { row in ceilings.append((row.int(0), EventIdCeilings.Prefix(row.bytes(1)))) }
        return ceilings
    }

    /// Records `ids` (each with its device's hash and when it was recorded) in the generation of their time: the
    /// current one, or a new one of `span` microseconds when the current one has ended. An id its generation holds
    /// already is not added again. The caller raises the devices' ceilings (`JournalEntry.write`).
    ///
    /// The rows go in in key order, `insertChunk` to a statement (#66): one statement's start, bindings and end
    /// serve that many rows, and rows that follow each other go to the same pages.
    static func record(_ ids: some Sequence<(hash: Int64, id: [UInt8], at: Int64)>, span: Int64, _ db: Database) throws {
        let open = try FastStatement(db, "INSERT INTO event_id_generations (gen, ends_at) VALUES (?, ?)")
        var current = try generations(db).last
        var rows: [Row] = []
        rows.reserveCapacity(ids.underestimatedCount)
        for (hash, id, at) in ids {
            // A time before the current generation's (a clock set back) stays in it: kept longer, never shorter.
            if current.map({ at >= $0.endsAt }) ?? true {
                let next = Generation(gen: (current?.gen ?? 0) + 1, endsAt: at + max(span, 1))
                try open.run(.int(next.gen), .int(next.endsAt))
                current = next
            }
            guard let gen = current?.gen else { continue }
            rows.append(Row(gen: gen, id: id, hash: hash))
        }
        rows.sort()
        var rest = rows[...]
        if rows.count >= insertChunk {
            let chunk = try FastStatement(db, insertSQL(rows: insertChunk))
            // The chunk's ids side by side, bound where they lie (no copy of each) while the statement runs.
            var bytes: [UInt8] = []
            while rest.count >= insertChunk {
                let rows = rest.prefix(insertChunk)
                bytes.removeAll(keepingCapacity: true)
                for row in rows { bytes += row.id }
                try bytes.withUnsafeBytes { bytes in
                    try chunk.run { binder in
                        var code = SQLITE_OK
                        var offset = 0
                        for (n, row) in zip(Int32(0)..., rows) where code == SQLITE_OK {
                            code = binder.int(3 * n + 1, row.gen)
                            if code == SQLITE_OK {
                                code = binder.blob(3 * n + 2, UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + row.id.count]))
                            }
                            if code == SQLITE_OK { code = binder.int(3 * n + 3, row.hash) }
                            offset += row.id.count
                        }
                        return code
                    }
                }
                rest = rest.dropFirst(insertChunk)
            }
        }
        guard !rest.isEmpty else { return }
        let one = try FastStatement(db, insertSQL(rows: 1))
        for row in rest { try one.run(.int(row.gen), .blob(row.id), .int(row.hash)) }
    }

    /// Rows an insert statement of `record` takes at once.
    static let insertChunk = 32

    /// One row of `event_ids`, ordered as its key: SQLite compares blobs as `memcmp`, then by length.
    struct Row: Comparable {
        var gen: Int64
        var id: [UInt8]
        var hash: Int64

        static func < (a: Row, b: Row) -> Bool {
            if a.gen != b.gen { return a.gen < b.gen }
            if a.id != b.id { return a.id.lexicographicallyPrecedes(b.id) }
            return a.hash < b.hash
        }
    }

    static func insertSQL(rows: Int) -> String {
        "INSERT OR IGNORE INTO event_ids (gen, id, device_hash) VALUES " + Array(repeating: "(?, ?, ?)", count: rows).joined(separator: ", ")
    }

    /// Raises the ceilings kept apart from device rows (`event_id_ceilings`) to `highest`, for ids recorded without
    /// their device's row.
    static func raiseCeilingsApart(_ highest: [Int64: EventIdCeilings.Prefix], _ db: Database) throws {
        // In rowid order, so that consecutive devices share pages. SQLite compares blobs as memcmp does, in the
        // prefixes' order.
        let raise = try FastStatement(
            db,
            """
            INSERT INTO event_id_ceilings (device_hash, through) VALUES (?, ?)
            ON CONFLICT (device_hash) DO UPDATE SET through = excluded.through WHERE excluded.through > through
            """
        )
        for (hash, prefix) in highest.sorted(by: { $0.key < $1.key }) { try raise.run(.int(hash), .blob(prefix.bytes)) }
    }

    /// Forgets up to `limit` ids of the generations that ended at or before `cutoff`, oldest first, in key
    /// order; a generation left empty is removed. Returns how many were forgotten.
    static func prune(recordedBefore cutoff: Int64, limit: Int, _ db: Database) throws -> Int {
        let select = try FastStatement(db, "SELECT id, device_hash FROM event_ids WHERE gen = ? ORDER BY id, device_hash LIMIT ?")
        let delete = try FastStatement(db, "DELETE FROM event_ids WHERE gen = ? AND id = ? AND device_hash = ?")
        let close = try FastStatement(db, "DELETE FROM event_id_generations WHERE gen = ?")
        var forgotten = 0
        for generation in try generations(db) where generation.endsAt <= cutoff {
            let wanted = limit - forgotten
            if wanted <= 0 { break }
            var keys: [(id: [UInt8], hash: Int64)] = []
            try select.query(.int(generation.gen), .int(Int64(wanted))) { row in keys.append((row.bytes(0), row.int(1))) }
            for key in keys { try delete.run(.int(generation.gen), .blob(key.id), .int(key.hash)) }
            forgotten += keys.count
            if keys.count < wanted { try close.run(.int(generation.gen)) }
        }
        return forgotten
    }
}
