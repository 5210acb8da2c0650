import GRDB
import Metrics
import SyncHealthCore
import SyncHealthStore
import Synchronization

/// Per device, a ceiling that no event id recorded for it is above, so that the journal's dedupe judges a claim
/// whose ids are all above it without reading the tables: ids that only grow (the client's UUIDv7) are new.
///
/// The dedupe read is a B-tree seek a generation for every claim (docs/architecture.md#event-ids-by-generation).
/// A ceiling is the first 16 bytes of an id, zero-padded (`Prefix`), so that a device costs a
/// dictionary entry (24 bytes, up to 64 with the room a dictionary keeps to grow) and no allocation. An id whose
/// prefix is above its device's ceiling is above every recorded id, so it was not recorded; any other id is read as
/// before. Prefixes keep the ids' order (an id at or below another has a prefix at or below the other's), so the
/// prefix of a device's highest id is a ceiling for all of them.
///
/// The ceilings live in the backlog (`JournalBacklog`), behind its lock:
/// - an append raises the ceiling of each device it records an id for, as it adds the ids to the backlog;
/// - a device gets its ceiling from its first read, before that group is appended: the highest of its ids in the
///   backlog (looked at before the tables: a fold commits its groups to the tables before it takes them out of
///   the backlog, so an id gone from the backlog is in the tables a later read sees) and its ceiling in the tables
///   (`devices.id_ceiling`, see `EventIds`). Both run on the journal's queue, where every append runs, so nothing
///   is recorded between the look and the ceiling;
/// - expiry only forgets ids, so a ceiling stays true, and only a removed device's ceiling is lowered.
///
/// On the `tables` commit path nothing is appended to the backlog, and the ceilings are not used.
struct EventIdCeilings: Sendable {
    /// The first 16 bytes of an id, zero-padded, in the ids' byte order.
    struct Prefix: Comparable, Sendable {
        var high: UInt64
        var low: UInt64

        /// No id's prefix is above it.
        static let top = Prefix(high: .max, low: .max)
        /// The ceiling of a device without ids. Only an id whose bytes up to the 16th are all zero is not above it.
        static let zero = Prefix(high: 0, low: 0)

        init(high: UInt64, low: UInt64) {
            self.high = high
            self.low = low
        }

        init(_ id: some Collection<UInt8>) {
            var words: (UInt64, UInt64) = (0, 0)
            for (i, byte) in id.prefix(16).enumerated() {
                let shift = UInt64(8 * (7 - i % 8))
                if i < 8 { words.0 |= UInt64(byte) << shift } else { words.1 |= UInt64(byte) << shift }
            }
            (high, low) = words
        }

        /// The prefix as 16 bytes in the ids' byte order, as the tables store it.
        var bytes: [UInt8] {
            (0..<16).map { i in UInt8(truncatingIfNeeded: (i < 8 ? high : low) >> UInt64(8 * (7 - i % 8))) }
        }

        static func < (a: Prefix, b: Prefix) -> Bool { (a.high, a.low) < (b.high, b.low) }
    }

    /// Sharded, so that growing rehashes one shard under the backlog's lock, not every device's ceiling.
    private var ceilings = ShardedDictionary<Int64, Prefix>()
    /// Claims judged without a read, since the store opened (tests check that the read is skipped).
    private(set) var judgedInMemory = 0

    /// The device's ceiling, once it has one.
    func ceiling(_ hash: Int64) -> Prefix? { ceilings[hash] }

    /// Whether every id is above the device's ceiling, and so new; counts the claim if so.
    mutating func allNew(_ hash: Int64, _ ids: [[UInt8]]) -> Bool {
        guard let ceiling = ceilings[hash], ids.allSatisfy({ ceiling < Prefix($0) }) else { return false }
        judgedInMemory += 1
        return true
    }

    /// Raises the device's ceiling to `prefix`, if it has one and it is lower (an append recorded an id of it).
    mutating func raise(_ hash: Int64, toCover prefix: Prefix) {
        guard let ceiling = ceilings[hash], ceiling < prefix else { return }
        ceilings[hash] = prefix
    }

    /// Gives the device a ceiling, from its ids found before any later append (or keeps a higher one).
    mutating func set(_ hash: Int64, _ ceiling: Prefix) {
        ceilings[hash] = max(ceilings[hash] ?? ceiling, ceiling)
    }

    /// Makes room for `count` devices' ceilings.
    mutating func reserveCapacity(_ count: Int) {
        ceilings.reserveCapacity(count)
    }

    /// A removed device's ceiling (`DeviceRemoval`): an erased one starts again from zero, so that its ids from
    /// before, still in the tables until the sweep deletes them, are not looked up; a forgotten one is dropped, and
    /// read again if the device comes back.
    mutating func removed(_ hash: Int64, erased: Bool) {
        ceilings[hash] = erased ? .zero : nil
    }
}

extension SQLiteStore {
    /// `recordedBefore` for a group on the journal's queue: a claim whose ids are all above its device's ceiling is
    /// new without a read; the others are looked up in the backlog and read from the tables, and give their devices
    /// the ceilings they lack. Call it before the group is appended (its append raises the ceilings it set).
    func recordedBeforeOnJournalQueue(_ claims: [EventIds.Claim]) throws -> [[Bool]] {
        // Under the lock: the backlog's part, and for each device without a ceiling the highest of its ids there,
        // both before the tables are read (a fold writes the tables before it empties the backlog).
        var (recorded, toRead) = backlog.withLock { b in
            var toRead: [(claim: Int, inBacklog: EventIdCeilings.Prefix?)] = []
            let recorded = claims.enumerated().map { c, claim in
                if b.ceilings.allNew(claim.hash, claim.ids) { return [Bool](repeating: false, count: claim.ids.count) }
                toRead.append((c, b.ceilings.ceiling(claim.hash) == nil ? b.highest(claim.hash) : nil))
                return claim.ids.map { b.contains(claim.hash, $0) }
            }
            return (recorded, toRead)
        }
        claimsJudgedInMemory.increment(by: claims.count - toRead.count)
        if toRead.isEmpty { return recorded }
        claimsRead.increment(by: toRead.count)
        // A synchronous read: it runs here, on the journal's thread, not on another one.
        let tables = try pool.read { db in try EventIds.recordedBefore(toRead.map { claims[$0.claim] }, db) }
        var ceilings: [(hash: Int64, ceiling: EventIdCeilings.Prefix)] = []
        for (read, (inTables, tablesCeiling)) in zip(toRead, zip(tables.recorded, tables.ceilings)) {
            recorded[read.claim] = zip(recorded[read.claim], inTables).map { $0 || $1 }
            if let inBacklog = read.inBacklog { ceilings.append((claims[read.claim].hash, max(inBacklog, tablesCeiling))) }
        }
        if !ceilings.isEmpty {
            backlog.withLock { b in for (hash, ceiling) in ceilings { b.ceilings.set(hash, ceiling) } }
        }
        return recorded
    }
}
