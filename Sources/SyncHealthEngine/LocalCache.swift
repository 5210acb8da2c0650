import HeapModule
import SyncHealthCore

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
        guard deadlines.count > 2 * devices.count + 1024 else { return }
        var live: [Deadline] = []
        live.reserveCapacity(devices.count)
        for i in deadlineOf.indices {
            let at = deadlineOf[i]
            queuedAt[i] = at
            if at != .max { live.append(Deadline(at: Timestamp(microseconds: at), index: Int32(i))) }
        }
        deadlines = Heap(live)
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
        compactDeadlinesIfNeeded()
        counters = plan.counters
        releases = plan.releases
        fleetAlerts = plan.fleetAlerts
        policy.keepChanges()
        for t in plan.transitions { firing[t.kind, default: 0] += t.change == .fire ? 1 : -1 }
    }
}
