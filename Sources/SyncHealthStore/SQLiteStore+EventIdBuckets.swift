import GRDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How the embedded store remembers the event ids a device's tail (`EventIdTails`) spilled: per device, in buckets
/// of ids sorted by their bytes, one row (at most `maxBytes` of entries) per bucket.
///
/// A bucket covers the ids from its `lo` up to the next bucket's `lo`; a device's first bucket has an empty `lo`.
/// A spill reads each of its devices' buckets once, records every id in memory, and writes each changed bucket
/// back once: one row per bucket where a row per id (the `seen_events` table of migrations v1-v3) cost a
/// B-tree insert per event on the one writer, ~40% of batched ingestion's throughput (docs/benchmarks-log.md, "Event ids in
/// buckets"). A bucket that grows past `maxBytes` splits, as a B-tree page does.
///
/// Each entry keeps the time it was recorded; expiry removes entries by that time, oldest buckets first, through an
/// index on each bucket's oldest entry.
enum EventIdBuckets {
    /// The most bytes of entries in one row: a few rows share a 4 KiB page, and none spills to an overflow page.
    static let maxBytes = 2048

    /// The buckets of the devices one group touches, with the ids it recorded, not yet written.
    struct Group {
        private var devices: [Int64: Device] = [:]

        /// Loads, for each device, the buckets that cover `ids` (each id as its UTF-8 bytes, with its device's hash).
        init(ids: some Sequence<(hash: Int64, id: [UInt8])>, _ db: Database) throws {
            var ranges: [Int64: (low: [UInt8], high: [UInt8])] = [:]
            for (hash, id) in ids {
                if let range = ranges[hash] {
                    if less(id, range.low) { ranges[hash]?.low = id }
                    if less(range.high, id) { ranges[hash]?.high = id }
                } else {
                    ranges[hash] = (id, id)
                }
            }
            let select = try FastStatement(
                db,
                """
                SELECT seq, lo, oldest, entries FROM event_id_buckets
                WHERE device_hash = ?1
                  AND lo >= coalesce((SELECT max(lo) FROM event_id_buckets WHERE device_hash = ?1 AND lo <= ?2), x'')
                  AND lo <= ?3
                ORDER BY lo
                """
            )
            devices.reserveCapacity(ranges.count)
            for (hash, range) in ranges {
                var buckets: [Bucket] = []
                try select.query(.int(hash), .blob(range.low), .blob(range.high)) { row in
                    buckets.append(Bucket(seq: row.int(0), lo: row.bytes(1), oldest: row.int(2), bytes: row.bytes(3)))
                }
                devices[hash] = Device(buckets: buckets)
            }
        }

        /// Whether `id` of the device was recorded before this group.
        func recordedBefore(_ hash: Int64, _ id: [UInt8]) -> Bool {
            guard let device = devices[hash], let b = device.bucket(for: id) else { return false }
            return device.buckets[b].contains(id)
        }

        /// Records `id` at `at` unless this group already did; returns whether it did now.
        mutating func record(_ hash: Int64, _ id: [UInt8], at: Int64) -> Bool {
            devices[hash, default: Device(buckets: [])].record(id, at: at)
        }

        /// Writes every bucket that gained ids: rewritten in place, split when too large, or inserted when new.
        func write(_ db: Database) throws {
            let update = try FastStatement(db, "UPDATE event_id_buckets SET entries = ? WHERE seq = ?")
            let updateOldest = try FastStatement(db, "UPDATE event_id_buckets SET entries = ?, oldest = ? WHERE seq = ?")
            let insert = try FastStatement(db, "INSERT INTO event_id_buckets (device_hash, lo, oldest, entries) VALUES (?, ?, ?, ?)")
            for (hash, device) in devices {
                for bucket in device.buckets where !bucket.added.isEmpty {
                    let pieces = bucket.merged()
                    for (i, piece) in pieces.enumerated() {
                        if i == 0, let seq = bucket.seq {
                            if piece.oldest == bucket.oldest {
                                try update.run(.blob(piece.bytes), .int(seq))
                            } else {
                                try updateOldest.run(.blob(piece.bytes), .int(piece.oldest), .int(seq))
                            }
                        } else {
                            try insert.run(.int(hash), .blob(piece.lo), .int(piece.oldest), .blob(piece.bytes))
                        }
                    }
                }
            }
        }
    }

    /// One device's buckets in a group, ordered by `lo`.
    struct Device {
        var buckets: [Bucket]
        /// Ids this group recorded for the device.
        var recordedNow: Set<[UInt8]> = []

        /// The bucket that covers `id`: the last whose `lo` is not above it.
        func bucket(for id: [UInt8]) -> Int? {
            var low = 0
            var high = buckets.count
            while low < high {
                let mid = (low + high) / 2
                if less(id, buckets[mid].lo) { high = mid } else { low = mid + 1 }
            }
            return low == 0 ? nil : low - 1
        }

        mutating func record(_ id: [UInt8], at: Int64) -> Bool {
            guard recordedNow.insert(id).inserted else { return false }
            if let b = bucket(for: id) {
                buckets[b].added.append((id, at))
            } else {
                // No bucket yet (a device's first bucket starts at the empty `lo`, below every id).
                var first = Bucket(seq: nil, lo: [], oldest: at, bytes: [])
                first.added.append((id, at))
                buckets.insert(first, at: 0)
            }
            return true
        }
    }

    /// One bucket: its stored entries, and what a group added to it.
    struct Bucket {
        /// The row, or `nil` for a bucket this group creates.
        var seq: Int64?
        var lo: [UInt8]
        var oldest: Int64
        /// Entries as stored: each a 2-byte length, the id's bytes and the 8-byte time, sorted by id.
        var bytes: [UInt8]
        /// Where each entry starts in `bytes`.
        var offsets: [Int]
        var added: [(id: [UInt8], at: Int64)] = []

        /// A stored bucket. Entries that cannot be read are dropped (their ids are forgotten) rather than
        /// failing every group that touches the device.
        init(seq: Int64?, lo: [UInt8], oldest: Int64, bytes: [UInt8]) {
            self.seq = seq
            self.lo = lo
            self.oldest = oldest
            if let offsets = EventIdBuckets.offsets(bytes) {
                self.bytes = bytes
                self.offsets = offsets
            } else {
                self.bytes = []
                self.offsets = []
            }
        }

        func contains(_ id: [UInt8]) -> Bool {
            var low = 0
            var high = offsets.count
            while low < high {
                let mid = (low + high) / 2
                let order = compare(id, entryAt: offsets[mid])
                if order == 0 { return true }
                if order < 0 { high = mid } else { low = mid + 1 }
            }
            return false
        }

        /// The order of `id` against the entry at `offset`: negative, zero or positive.
        func compare(_ id: [UInt8], entryAt offset: Int) -> Int {
            bytes.withUnsafeBufferPointer { entries in
                id.withUnsafeBufferPointer { key in
                    EventIdBuckets.compare(key, UnsafeBufferPointer(rebasing: entries[EventIdBuckets.idRange(bytes, entryAt: offset)]))
                }
            }
        }

        /// The stored entries and the added ones, merged in order and cut into pieces of at most `maxBytes`
        /// (the first keeps this bucket's row and `lo`).
        func merged() -> [(lo: [UInt8], oldest: Int64, bytes: [UInt8])] {
            let all = mergedEntries()
            return EventIdBuckets.pieces(all.bytes, starts: all.starts, firstLo: lo)
        }

        /// The stored entries and the added ones, merged in order, and where each entry starts.
        func mergedEntries() -> (bytes: [UInt8], starts: [Int]) {
            var all = ByteWriter(capacity: bytes.count + added.count * 24)
            var starts: [Int] = []
            starts.reserveCapacity(offsets.count + added.count)
            var next = 0
            for (id, at) in added.sorted(by: { less($0.id, $1.id) }) {
                while next < offsets.count, compare(id, entryAt: offsets[next]) > 0 {
                    starts.append(all.bytes.count)
                    all.bytes.append(contentsOf: bytes[offsets[next]..<end(of: next)])
                    next += 1
                }
                starts.append(all.bytes.count)
                EventIdBuckets.append(id, at: at, to: &all)
            }
            if next < offsets.count {
                for i in next..<offsets.count { starts.append(all.bytes.count + offsets[i] - offsets[next]) }
                all.bytes.append(contentsOf: bytes[offsets[next]...])
            }
            return (all.bytes, starts)
        }

        private func end(of entry: Int) -> Int { entry + 1 < offsets.count ? offsets[entry + 1] : bytes.count }
    }

    /// Cuts entries into the fewest pieces of about `maxBytes` at most (a piece may pass it by less than one
    /// entry), as even as can be, each with its oldest time and a `lo`: `firstLo` for the first (the bucket's
    /// own), each other's first id.
    static func pieces(_ bytes: [UInt8], starts: [Int], firstLo: [UInt8]) -> [(lo: [UInt8], oldest: Int64, bytes: [UInt8])] {
        let count = max(1, (bytes.count + maxBytes - 1) / maxBytes)
        var pieces: [(lo: [UInt8], oldest: Int64, bytes: [UInt8])] = []
        var pieceStart = 0
        var oldest = Int64.max
        func cut(upTo end: Int) {
            let lo = pieces.isEmpty ? firstLo : Array(bytes[idRange(bytes, entryAt: pieceStart)])
            pieces.append((lo, oldest == .max ? 0 : oldest, Array(bytes[pieceStart..<end])))
        }
        for (i, start) in starts.enumerated() {
            // A piece ends at the first entry that starts past its share of the bytes.
            if start > pieceStart, start >= (pieces.count + 1) * bytes.count / count {
                cut(upTo: start)
                pieceStart = start
                oldest = .max
            }
            oldest = min(oldest, time(bytes, entryEnd: i + 1 < starts.count ? starts[i + 1] : bytes.count))
        }
        cut(upTo: bytes.count)
        return pieces
    }

    /// Where the id of the entry at `offset` lies: after its 2-byte length.
    static func idRange(_ bytes: [UInt8], entryAt offset: Int) -> Range<Int> {
        (offset + 2)..<(offset + 2 + (Int(bytes[offset]) | Int(bytes[offset + 1]) << 8))
    }

    /// Forgets up to `limit` entries recorded before `cutoff`, from the buckets whose oldest entry is oldest; a
    /// bucket left empty is deleted (ids in its range then belong to the bucket before it, or to a new first
    /// bucket). A bucket that cannot be read is deleted, its ids forgotten uncounted. Returns how many were forgotten.
    static func prune(recordedBefore cutoff: Int64, limit: Int, _ db: Database) throws -> Int {
        let select = try FastStatement(db, "SELECT seq, entries FROM event_id_buckets WHERE oldest < ? ORDER BY oldest LIMIT 32")
        let update = try FastStatement(db, "UPDATE event_id_buckets SET entries = ?, oldest = ? WHERE seq = ?")
        let delete = try FastStatement(db, "DELETE FROM event_id_buckets WHERE seq = ?")
        return try expireRows(select, recordedBefore: cutoff, limit: limit) { seq, kept, oldest in
            if let oldest {
                try update.run(.blob(kept), .int(oldest), .int(seq))
            } else {
                try delete.run(.int(seq))
            }
        }
    }

    /// Forgets up to `limit` entries recorded before `cutoff` from the rows `select` returns for the cutoff (each
    /// its key and its entries, oldest first, a few at a time), and hands what is left of each row to `write`,
    /// which must take the row out of what `select` returns once nothing in it is that old. Returns how many were
    /// forgotten.
    static func expireRows(
        _ select: FastStatement,
        recordedBefore cutoff: Int64,
        limit: Int,
        write: (_ key: Int64, _ kept: [UInt8], _ oldest: Int64?) throws -> Void
    ) throws -> Int {
        var forgotten = 0
        while forgotten < limit {
            var rows: [(key: Int64, bytes: [UInt8])] = []
            try select.query(.int(cutoff)) { rows.append(($0.int(0), $0.bytes(1))) }
            if rows.isEmpty { break }
            for row in rows where forgotten < limit {
                let left = expire(row.bytes, recordedBefore: cutoff, limit: limit - forgotten)
                forgotten += left.forgotten
                try write(row.key, left.kept, left.oldest)
            }
        }
        return forgotten
    }

    /// What is left of the entries `bytes` once up to `limit` of those recorded before `cutoff` are forgotten: the
    /// entries kept, their oldest time (`nil` when none is), and how many were forgotten. Bytes that are not a list
    /// of entries keep nothing and count nothing.
    static func expire(_ bytes: [UInt8], recordedBefore cutoff: Int64, limit: Int) -> (kept: [UInt8], oldest: Int64?, forgotten: Int) {
        let starts = offsets(bytes) ?? []
        var kept: [UInt8] = []
        var oldest: Int64?
        var forgotten = 0
        for (i, start) in starts.enumerated() {
            let end = i + 1 < starts.count ? starts[i + 1] : bytes.count
            let at = time(bytes, entryEnd: end)
            if at < cutoff, forgotten < limit {
                forgotten += 1
            } else {
                kept.append(contentsOf: bytes[start..<end])
                oldest = min(oldest ?? at, at)
            }
        }
        return (kept, oldest, forgotten)
    }

    /// Appends one entry: its id's length (2 bytes), the id, and the time.
    static func append(_ id: [UInt8], at: Int64, to writer: inout ByteWriter) {
        writer.u8(UInt8(truncatingIfNeeded: id.count))
        writer.u8(UInt8(truncatingIfNeeded: id.count >> 8))
        writer.bytes.append(contentsOf: id)
        writer.i64(at)
    }

    /// The time of the entry that ends at `entryEnd`.
    static func time(_ bytes: [UInt8], entryEnd: Int) -> Int64 {
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(bytes[entryEnd - 8 + i]) << (8 * UInt64(i)) }
        return Int64(bitPattern: v)
    }

    /// Where each entry starts, or `nil` if the bytes are not a list of entries.
    static func offsets(_ bytes: [UInt8]) -> [Int]? {
        var offsets: [Int] = []
        var i = 0
        while i < bytes.count {
            guard i + 2 <= bytes.count else { return nil }
            let count = Int(bytes[i]) | Int(bytes[i + 1]) << 8
            guard i + 2 + count + 8 <= bytes.count else { return nil }
            offsets.append(i)
            i += 2 + count + 8
        }
        return offsets
    }

    /// Byte order, as SQLite compares blobs: negative, zero or positive.
    static func compare(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Int {
        let common = min(a.count, b.count)
        if common > 0, let pa = a.baseAddress, let pb = b.baseAddress {
            let order = memcmp(pa, pb, common)
            if order != 0 { return Int(order) }
        }
        return a.count - b.count
    }

    static func less(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBufferPointer { pa in b.withUnsafeBufferPointer { pb in compare(pa, pb) < 0 } }
    }
}
