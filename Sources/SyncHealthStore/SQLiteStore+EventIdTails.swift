import GRDB

/// Each device's newest event ids, in one row keyed by the device's hash (the table's rowid), in front of its
/// buckets (`EventIdBuckets`).
///
/// A fold adds a device's new ids to its tail: one rowid read and one write, where a bucket cost a read through
/// two index seeks and a table seek, and then a write (half of a fold's CPU under single events,
/// docs/benchmarks-log.md, "Event ids in tails"). A tail that passes `maxBytes` spills whole into the buckets,
/// which then cost a bucket's read and write once for that many ids.
///
/// `buckets_through` is the highest id spilled into the buckets, so dedupe reads the buckets only for an id at
/// or below it: ids that only grow (the client's UUIDv7) never need them. NULL means any id may be there. A device
/// without a tail has no buckets: migration v9 gave a tail to every device with buckets, only a spill writes
/// buckets, and expiry empties tails without deleting them.
enum EventIdTails {
    /// The most bytes of entries a tail keeps; more spill into the buckets. A few dozen ids: the table stays small
    /// enough to keep in the page cache, and a spill comes once in many folds of a device.
    static let maxBytes = 1024

    /// For each claimed id, whether it was recorded in the tables: in its device's tail, or in its buckets. And for
    /// each claim, its device's ceiling in the tables (`EventIdCeilings`): no id there is above it.
    static func recordedBefore(
        _ claims: [(hash: Int64, ids: [[UInt8]])],
        _ db: Database
    ) throws -> (recorded: [[Bool]], ceilings: [EventIdCeilings.Prefix]) {
        let select = try FastStatement(db, "SELECT entries, buckets_through FROM event_id_tails WHERE device_hash = ?")
        var recorded: [[Bool]] = []
        recorded.reserveCapacity(claims.count)
        var ceilings: [EventIdCeilings.Prefix] = []
        ceilings.reserveCapacity(claims.count)
        var inBuckets: [(claim: Int, index: Int)] = []
        for (c, claim) in claims.enumerated() {
            var tail: EventIdBuckets.Bucket?
            var through: [UInt8]?
            try select.query(.int(claim.hash)) { row in
                tail = EventIdBuckets.Bucket(seq: nil, lo: [], oldest: 0, bytes: row.bytes(0))
                through = row.isNull(1) ? nil : row.bytes(1)
            }
            ceilings.append(ceiling(of: tail, through: through))
            recorded.append(
                claim.ids.enumerated().map { i, id in
                    guard let tail else { return false }
                    if tail.contains(id) { return true }
                    if through.map({ !EventIdBuckets.less($0, id) }) ?? true { inBuckets.append((c, i)) }
                    return false
                }
            )
        }
        if !inBuckets.isEmpty {
            let group = try EventIdBuckets.Group(ids: inBuckets.lazy.map { (hash: claims[$0.claim].hash, id: claims[$0.claim].ids[$0.index]) }, db)
            for (c, i) in inBuckets { recorded[c][i] = group.recordedBefore(claims[c].hash, claims[c].ids[i]) }
        }
        return (recorded, ceilings)
    }

    /// The ceiling of a device's ids in the tables: its tail's last id or its bound, whichever is higher; the top
    /// when the bound is NULL; zero without a tail (a device without a tail has no buckets).
    static func ceiling(of tail: EventIdBuckets.Bucket?, through: [UInt8]?) -> EventIdCeilings.Prefix {
        guard let tail else { return .zero }
        guard let through else { return .top }
        let last = tail.offsets.last.map { EventIdCeilings.Prefix(tail.bytes[EventIdBuckets.idRange(tail.bytes, entryAt: $0)]) }
        return max(last ?? .zero, EventIdCeilings.Prefix(through))
    }

    /// Records `ids` (each with its device's hash and when it was recorded) in their devices' tails, and spills
    /// the tails that pass `maxBytes` into the buckets. An id a tail already holds is not added again.
    static func record(_ ids: some Sequence<(hash: Int64, id: [UInt8], at: Int64)>, _ db: Database) throws {
        var byDevice: [Int64: [(id: [UInt8], at: Int64)]] = [:]
        for (hash, id, at) in ids { byDevice[hash, default: []].append((id, at)) }
        let select = try FastStatement(db, "SELECT entries, oldest, buckets_through FROM event_id_tails WHERE device_hash = ?")
        let update = try FastStatement(db, "UPDATE event_id_tails SET entries = ? WHERE device_hash = ?")
        let updateOldest = try FastStatement(db, "UPDATE event_id_tails SET entries = ?, oldest = ? WHERE device_hash = ?")
        let insert = try FastStatement(db, "INSERT INTO event_id_tails (device_hash, entries, oldest, buckets_through) VALUES (?, ?, ?, x'')")
        var spills: [Spill] = []
        // In rowid order: consecutive devices share the table's leaf pages.
        for (hash, new) in byDevice.sorted(by: { $0.key < $1.key }) {
            var tail = EventIdBuckets.Bucket(seq: nil, lo: [], oldest: 0, bytes: [])
            var found = false
            var oldest: Int64?
            var through: [UInt8]? = []
            try select.query(.int(hash)) { row in
                found = true
                tail = EventIdBuckets.Bucket(seq: nil, lo: [], oldest: 0, bytes: row.bytes(0))
                oldest = row.isNull(1) ? nil : row.int(1)
                through = row.isNull(2) ? nil : row.bytes(2)
            }
            // Merging adds each new id whole, so the tail's size is known before it is made (an id repeated within
            // `new` counts twice: at worst a tail spills a little early).
            var size = tail.bytes.count
            for (id, _) in new where !tail.contains(id) { size += 2 + id.count + 8 }
            if size == tail.bytes.count { continue }
            if size > maxBytes {
                spills.append(Spill(hash: hash, found: found, through: through, tail: tail, new: new))
                continue
            }
            var added = Set<[UInt8]>()
            for (id, at) in new where !tail.contains(id) && (new.count == 1 || added.insert(id).inserted) { tail.added.append((id, at)) }
            let earliest = tail.added.lazy.map(\.at).min() ?? .max
            let entries = tail.mergedEntries().bytes
            if !found {
                try insert.run(.int(hash), .blob(entries), .int(earliest))
            } else if let oldest, oldest <= earliest {
                // Unchanged, `oldest` stays out of the statement: setting it, even to itself, rewrites its index entry.
                try update.run(.blob(entries), .int(hash))
            } else {
                try updateOldest.run(.blob(entries), .int(min(oldest ?? earliest, earliest)), .int(hash))
            }
        }
        if !spills.isEmpty { try spill(spills, db) }
    }

    /// A tail to move into the buckets, and the fold's ids for it.
    struct Spill {
        var hash: Int64
        /// Whether the tail has a row.
        var found: Bool
        /// The tail's `buckets_through` before the spill.
        var through: [UInt8]?
        var tail: EventIdBuckets.Bucket
        /// The fold's ids, as it gathered them (the same storage, not a copy: a fold of batches spills hundreds of
        /// thousands).
        var new: [(id: [UInt8], at: Int64)]

        /// The tail's stored entries' ids and times.
        var stored: [(id: [UInt8], at: Int64)] {
            let bytes = tail.bytes
            return tail.offsets.enumerated().map { i, start in
                let end = i + 1 < tail.offsets.count ? tail.offsets[i + 1] : bytes.count
                return (Array(bytes[EventIdBuckets.idRange(bytes, entryAt: start)]), EventIdBuckets.time(bytes, entryEnd: end))
            }
        }
    }

    /// Moves each tail's entries and the fold's ids for it into its device's buckets, and leaves the tail empty,
    /// its `buckets_through` raised to the highest id moved (or left NULL).
    static func spill(_ spills: [Spill], _ db: Database) throws {
        let stored = spills.map(\.stored)
        let ids = zip(spills, stored).lazy.flatMap { spill, stored in [stored, spill.new].joined().lazy.map { (hash: spill.hash, id: $0.id) } }
        var group = try EventIdBuckets.Group(ids: ids, db)
        for (spill, stored) in zip(spills, stored) {
            for (id, at) in [stored, spill.new].joined() where !group.recordedBefore(spill.hash, id) { _ = group.record(spill.hash, id, at: at) }
        }
        try group.write(db)
        let empty = try FastStatement(db, "UPDATE event_id_tails SET entries = x'', oldest = NULL, buckets_through = ? WHERE device_hash = ?")
        let insert = try FastStatement(db, "INSERT INTO event_id_tails (device_hash, entries, oldest, buckets_through) VALUES (?, x'', NULL, ?)")
        for (spill, stored) in zip(spills, stored) {
            let highest = [stored, spill.new].joined().lazy.map(\.id).max(by: EventIdBuckets.less) ?? []
            let through: FastStatement.Value = spill.through.map { .blob(EventIdBuckets.less($0, highest) ? highest : $0) } ?? .null
            if spill.found {
                try empty.run(through, .int(spill.hash))
            } else {
                try insert.run(.int(spill.hash), through)
            }
        }
    }

    /// Forgets up to `limit` entries recorded before `cutoff`, from the tails whose oldest entry is oldest. A tail
    /// left empty stays, with its `buckets_through`. Returns how many were forgotten.
    static func prune(recordedBefore cutoff: Int64, limit: Int, _ db: Database) throws -> Int {
        let select = try FastStatement(db, "SELECT device_hash, entries FROM event_id_tails WHERE oldest < ? ORDER BY oldest LIMIT 32")
        let update = try FastStatement(db, "UPDATE event_id_tails SET entries = ?, oldest = ? WHERE device_hash = ?")
        return try EventIdBuckets.expireRows(select, recordedBefore: cutoff, limit: limit) { hash, kept, oldest in
            try update.run(.blob(kept), oldest.map { .int($0) } ?? .null, .int(hash))
        }
    }
}
