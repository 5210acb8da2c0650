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

/// The groups that are in the journal and not yet in the tables, in journal order, with the event ids they
/// recorded (dedupe looks here as well as in the tables).
///
/// It lives behind a lock that every commit takes twice, so a fold's bookkeeping must not hold it long. The ids are
/// kept in generations: a fold starts a new one when it takes its entries, and forgets the generations it wrote
/// whole, instead of rebuilding the set from the entries left. What it forgets is handed back (`Forgotten`) and
/// released after the lock: rebuilding and releasing under it made every commit wait for the fold's bookkeeping.
struct JournalBacklog: Sendable {
    /// Ids by device hash.
    typealias Ids = [Int64: Set<EventIdBytes>]

    /// What `remove` took out, for the caller to release once the lock is let go.
    struct Forgotten: Sendable {
        var entries: [JournalEntry]
        var ids: [Ids]
    }

    private(set) var entries: [JournalEntry] = []
    /// The journal bytes of each entry.
    private var sizes: [Int] = []
    /// The ids of the entries added since the last fold took its entries.
    private var ids: Ids = [:]
    /// The ids of the entries folds took and have not yet forgotten, each with the newest entry it covers.
    private var taken: [(through: Int64, ids: Ids)] = []
    /// The journal bytes of `entries`.
    private(set) var bytes = 0
    /// When the oldest entry was written.
    private(set) var since: ContinuousClock.Instant?
    /// Folds so far (the maintenance service checkpoints after each).
    var folds = 0
    /// What the journal's dedupe knows without a read; `add` raises them, so they cover the backlog's ids.
    var ceilings = EventIdCeilings()

    mutating func add(_ entry: JournalEntry, bytes: Int, at now: ContinuousClock.Instant) {
        // An entry's ids come a device at a time: one look-up and one ceiling a device, not an id.
        var start = entry.ids.startIndex
        while start < entry.ids.endIndex {
            let hash = entry.ids[start].hash
            var end = start + 1
            while end < entry.ids.endIndex, entry.ids[end].hash == hash { end += 1 }
            let run = entry.ids[start..<end]
            Self.insert(run, into: &ids[hash, default: []])
            ceilings.raise(hash, toCover: run.lazy.map { EventIdCeilings.Prefix($0.id) }.max() ?? .zero)
            start = end
        }
        for removal in entry.removals {
            let hash = removal.key.stableHash
            let erased = removal.reason == .erased
            // An erased device's ids are forgotten here too: they must not answer for the device's next posts.
            if erased {
                ids[hash] = nil
                for g in taken.indices { taken[g].ids[hash] = nil }
            }
            ceilings.removed(hash, erased: erased)
        }
        entries.append(entry)
        sizes.append(bytes)
        self.bytes += bytes
        if since == nil { since = now }
    }

    private static func insert(_ run: ArraySlice<(hash: Int64, id: [UInt8])>, into set: inout Set<EventIdBytes>) {
        set.reserveCapacity(set.count + run.count)
        for (_, id) in run { set.insert(EventIdBytes(id)) }
    }

    /// The entries for a fold to write (those it has not written yet, it filters after the lock). Ids added from
    /// now on start a new generation.
    mutating func take() -> [JournalEntry] {
        if let last = entries.last?.seq, !ids.isEmpty {
            taken.append((last, ids))
            ids = [:]
        }
        return entries
    }

    /// Forgets the entries a fold wrote into the tables, and the id generations they cover.
    mutating func remove(through seq: Int64, at now: ContinuousClock.Instant) -> Forgotten {
        let folded = entries.prefix { $0.seq <= seq }.count
        let all = entries
        entries = Array(all[folded...])
        sizes.removeFirst(folded)
        var forgotten = Forgotten(entries: all, ids: [])
        taken.removeAll { generation in
            guard generation.through <= seq else { return false }
            forgotten.ids.append(generation.ids)
            return true
        }
        bytes = sizes.reduce(0, +)
        since = entries.isEmpty ? nil : now
        folds += 1
        return forgotten
    }

    /// Whether an entry not yet written into the tables changes the alerts table: a transition, or an erasure (which
    /// deletes the device's alerts). A fold keeps its entries here until they are committed.
    var changesAlerts: Bool { entries.contains { !$0.alerts.isEmpty || $0.erases } }

    /// Whether an entry not yet written into the tables holds webhook messages for the outbox.
    var holdsOutboxMessages: Bool { entries.contains { !$0.outbox.isEmpty } }

    func contains(_ hash: Int64, _ id: [UInt8]) -> Bool {
        let id = EventIdBytes(id)
        if ids[hash]?.contains(id) == true { return true }
        return taken.contains { $0.ids[hash]?.contains(id) == true }
    }

    /// The ceiling of each device's ids in the backlog, by device hash.
    func highestIds() -> [Int64: EventIdCeilings.Prefix] {
        var highest: [Int64: EventIdCeilings.Prefix] = [:]
        for generation in [ids] + taken.map(\.ids) {
            for (hash, set) in generation {
                for id in set { highest[hash] = max(highest[hash] ?? .zero, EventIdCeilings.Prefix(id.bytes)) }
            }
        }
        return highest
    }

    /// The ceiling of the device's ids in the backlog (`EventIdCeilings.Prefix.zero` for none).
    func highest(_ hash: Int64) -> EventIdCeilings.Prefix {
        let generations = [ids[hash]] + taken.map { $0.ids[hash] }
        return generations.lazy.compactMap { $0 }.joined().map { EventIdCeilings.Prefix($0.bytes) }.max() ?? .zero
    }
}
