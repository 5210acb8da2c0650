import SyncHealthCore
import SyncHealthStore

/// One group of the shared pipeline as a value: which round trip comes next, and when the group is done.
///
/// A group is planned on its devices as read, or, when it may write first, as this replica last read or wrote
/// them (`SharedCache`). Its write is guarded: refused when another replica wrote one of its devices, a fleet
/// alert or one of its event ids first, and then the group reads and plans again, up to `maxAttempts` times.
/// Writing first is given up at the first refusal, and when the plan needs fleet counts the cache does not
/// hold.
///
/// The machine does no I/O and holds no lock. `SharedMonitor` does what each `Action` says (the round trips,
/// planning with the notification policy, the cache) and reports back. Modelled on NIO's and Hummingbird's state
/// machines: each mutating step returns what to do next.
struct SharedGroupStateMachine {
    enum Action {
        /// Read these devices, claims and due timers; then `read(_:)`.
        case read(GroupRead)
        /// Plan on `snapshot`, with the devices of `due` as the timers to serve; then `planned(_:countsKnown:)`.
        case plan(GroupSnapshot, due: [DeviceKey])
        /// Write; then `wrote(_:)`. `first`: planned on the cache, without a read.
        case write(GroupWrite, first: Bool)
        /// The group is done: written, or with nothing to write.
        case finished(GroupPlan)
        /// Refused `maxAttempts` times in a row: answer the group's requests with an error.
        case giveUp
    }

    let keys: [DeviceKey]
    let claims: [EventIdClaim]
    /// The containers of the group's requests, whose counts a read returns (all of them when `everyContainer`).
    let containers: [String]
    let everyContainer: Bool
    let now: Timestamp
    let dueLimit: Int
    let maxAttempts: Int

    /// Attempts begun: reads, and the first plan on the cache.
    private(set) var attempts = 0
    /// Whether the attempt under way plans on the cache.
    private(set) var writingFirst: Bool
    /// The devices whose timers this group claimed. A claim holds for a lease, hidden from every other read, so
    /// they stay this group's through its later attempts.
    private(set) var claimedDue: [DeviceKey] = []
    /// Where the group is: each step is allowed in one state only, and a step out of order traps (a bug in the
    /// caller, as in NIO's state machines), so that a reply cannot be applied to an attempt it does not belong to.
    private enum State {
        /// Made; `start(cached:)` comes next.
        case initial
        /// A read is out; `read(_:)` comes next.
        case reading
        /// A plan is being made on `snapshot`; `planned(_:countsKnown:)` comes next.
        case planning(GroupSnapshot)
        /// `plan` is being written; `wrote(_:)` comes next.
        case writing(GroupPlan)
        /// Finished or given up: no step comes next.
        case done
    }

    private var state = State.initial

    init(
        keys: [DeviceKey],
        claims: [EventIdClaim],
        containers: [String],
        mayWriteFirst: Bool,
        everyContainer: Bool,
        now: Timestamp,
        dueLimit: Int,
        maxAttempts: Int = SharedPasses.maxAttempts
    ) {
        self.keys = keys
        self.claims = claims
        self.containers = containers
        self.writingFirst = mayWriteFirst
        self.everyContainer = everyContainer
        self.now = now
        self.dueLimit = dueLimit
        self.maxAttempts = maxAttempts
    }

    /// The first step. `cached`: the group's devices as the cache knows them, or `nil` when it does not know them
    /// all; looked at only when the group may write first.
    mutating func start(cached: GroupSnapshot?) -> Action {
        guard case .initial = state else { preconditionFailure("SharedGroupStateMachine.start(cached:) in \(state)") }
        if writingFirst, let cached {
            attempts = 1
            state = .planning(cached)
            return .plan(cached, due: [])
        }
        return nextAttempt()
    }

    /// The read came back.
    mutating func read(_ snapshot: GroupSnapshot) -> Action {
        guard case .reading = state else { preconditionFailure("SharedGroupStateMachine.read(_:) in \(state)") }
        for stored in snapshot.due where !claimedDue.contains(stored.record.key) { claimedDue.append(stored.record.key) }
        state = .planning(snapshot)
        return .plan(snapshot, due: claimedDue)
    }

    /// The plan is made. `countsKnown`: whether the snapshot holds the counts of every container whose fleet rule
    /// the plan evaluates (always, after a read).
    mutating func planned(_ plan: GroupPlan, countsKnown: Bool) -> Action {
        guard case .planning(let snapshot) = state else {
            preconditionFailure("SharedGroupStateMachine.planned(_:countsKnown:) in \(state)")
        }
        if writingFirst && !countsKnown { return nextAttempt() }
        if plan.changes.isEmpty {
            state = .done
            return .finished(plan)
        }
        state = .writing(plan)
        var versions: [DeviceKey: Int64] = [:]
        for stored in snapshot.devices + snapshot.due where versions[stored.record.key] == nil {
            versions[stored.record.key] = stored.version
        }
        let write = GroupWrite(
            changes: plan.changes,
            versions: versions,
            fleetAlertsRead: snapshot.fleetAlerts,
            counters: plan.counterDeltas,
            claimedTimers: Set(claimedDue)
        )
        return .write(write, first: writingFirst)
    }

    /// The write came back: `written`, or refused.
    mutating func wrote(_ written: Bool) -> Action {
        guard case .writing(let plan) = state else { preconditionFailure("SharedGroupStateMachine.wrote(_:) in \(state)") }
        if written {
            state = .done
            return .finished(plan)
        }
        return nextAttempt()
    }

    /// A read, unless the group has had its attempts.
    private mutating func nextAttempt() -> Action {
        writingFirst = false
        guard attempts < maxAttempts else {
            state = .done
            return .giveUp
        }
        attempts += 1
        state = .reading
        let listed = Set(keys)
        return .read(
            GroupRead(
                keys: keys + claimedDue.filter { !listed.contains($0) },
                claims: claims,
                now: now,
                dueLimit: dueLimit,
                containers: everyContainer ? nil : containers
            )
        )
    }
}
