import HeapModule
import SyncHealthCore
import SyncHealthStore

/// A due time in the timer heap; `index` is the device's position in the table.
struct Deadline: Comparable {
    var at: Timestamp
    var index: Int32

    static func < (lhs: Deadline, rhs: Deadline) -> Bool { (lhs.at, lhs.index) < (rhs.at, rhs.index) }
}

/// What `LocalMonitor` keeps in memory: every device, its timers, the fleet counters and the notification policy.
/// Only the pipeline mutates it, by installing committed plans.
struct LocalCache {
    var devices = DeviceTable()
    /// Each device's current deadline (`Int64.max` for none).
    var deadlineOf = ChunkedArray<Int64>()
    /// When each device's entry in `deadlines` comes up (`Int64.max` for none); an entry at another time is stale.
    ///
    /// A deadline that moves later keeps its entry, which puts the device back at its new deadline when it comes
    /// up: a device's silence deadline moves with each event it sends, and an entry per move would fill the heap
    /// with stale entries.
    var queuedAt = ChunkedArray<Int64>()
    var deadlines = Heap<Deadline>()
    var counters = FleetCounters()
    var releases = ReleaseCounters()
    var fleetAlerts = FleetAlerts()
    var firing: [AlertKind: Int] = [:]
    var policy = NotificationPolicy()

    /// Adds a device at the end, with no deadline; returns its position.
    mutating func append(_ record: DeviceRecord, contribution: FleetContribution) -> Int {
        deadlineOf.append(.max)
        queuedAt.append(.max)
        return devices.append(record, contribution: contribution)
    }

    mutating func setDeadline(_ at: Timestamp?, for index: Int) {
        let value = at?.microseconds ?? .max
        deadlineOf[index] = value
        // Later than the entry queued (or none at all): that entry comes up first and puts the device back.
        guard value < queuedAt[index] else { return }
        queuedAt[index] = value
        deadlines.insert(Deadline(at: Timestamp(microseconds: value), index: Int32(index)))
    }

    /// Rebuilds the heap from `deadlineOf` once stale entries outnumber live ones (entries of deadlines that moved
    /// earlier), so that the heap stays the size of the fleet.
    mutating func compactDeadlinesIfNeeded() {
        guard deadlines.count > 2 * devices.liveCount + 1024 else { return }
        var live: [Deadline] = []
        live.reserveCapacity(devices.liveCount)
        for i in deadlineOf.indices {
            let at = deadlineOf[i]
            queuedAt[i] = at
            if at != .max { live.append(Deadline(at: Timestamp(microseconds: at), index: Int32(i))) }
        }
        deadlines = Heap(live)
    }

    /// Builds the table again without the devices that left (`DeviceTable.compacted`), with their timers.
    ///
    /// A pass over every device under the lock, once a quarter of the positions are gone: under churn, memory
    /// follows the devices kept rather than every device ever seen.
    mutating func compact() {
        let (table, from) = devices.compacted()
        var deadlineOf = ChunkedArray<Int64>()
        var queuedAt = ChunkedArray<Int64>()
        var live: [Deadline] = []
        for (i, old) in from.enumerated() {
            let at = self.deadlineOf[old]
            deadlineOf.append(at)
            queuedAt.append(at)
            if at != .max { live.append(Deadline(at: Timestamp(microseconds: at), index: Int32(i))) }
        }
        devices = table
        self.deadlineOf = deadlineOf
        self.queuedAt = queuedAt
        deadlines = Heap(live)
    }

    /// Whether a group at `now` would have timers to serve: a deadline queued at or before it (perhaps one that
    /// moved later, which the group then queues again), or the notification policy's settling.
    func hasDue(now: Timestamp) -> Bool {
        (deadlines.min.map { $0.at <= now } ?? false) || (policy.nextSettleTime.map { $0 <= now } ?? false)
    }

    /// Pops up to `limit` devices whose deadline is due at `now`, looking at `limit` entries at most. An entry
    /// that comes up before its device's deadline (which moved later) is queued again at the deadline.
    mutating func popDue(now: Timestamp, limit: Int) -> [Int] {
        var due: [Int] = []
        var looked = 0
        while looked < limit, let top = deadlines.min, top.at <= now {
            looked += 1
            _ = deadlines.popMin()
            let i = Int(top.index)
            guard queuedAt[i] == top.at.microseconds else { continue }
            let at = deadlineOf[i]
            if at <= now.microseconds {
                queuedAt[i] = .max
                deadlineOf[i] = .max
                due.append(i)
            } else {
                // Later, or none (`.max`, which stays unqueued).
                queuedAt[i] = at
                if at != .max { deadlines.insert(Deadline(at: Timestamp(microseconds: at), index: top.index)) }
            }
        }
        return due
    }

    /// Installs a committed plan.
    mutating func install(_ plan: GroupPlan) {
        for item in plan.touched {
            if let removal = item.removal {
                // A forgotten device's alerts resolved in the group's transitions; an erased one's just go.
                if removal == .erased { for (kind, _) in item.record.firingAlerts { firing[kind, default: 0] -= 1 } }
                if let i = item.index {
                    setDeadline(nil, for: i)
                    devices.remove(at: i)
                }
                continue
            }
            let i: Int
            if let index = item.index {
                i = index
                devices.records[i] = item.record
                devices.contributions[i] = item.contribution
            } else {
                i = append(item.record, contribution: item.contribution)
            }
            setDeadline(item.deadline, for: i)
        }
        if devices.wantsCompaction { compact() } else { compactDeadlinesIfNeeded() }
        // In place: the plan moved no copy of the counters (`GroupPlan.moves`).
        for move in plan.moves {
            counters.replace(move.old, with: move.new)
            releases.replace(move.old, with: move.new, firstSeenAt: move.firstSeenAt, lastSeenAt: move.lastSeenAt)
        }
        fleetAlerts = plan.fleetAlerts
        policy.keepChanges()
        for t in plan.transitions { firing[t.kind, default: 0] += t.change == .fire ? 1 : -1 }
    }
}
