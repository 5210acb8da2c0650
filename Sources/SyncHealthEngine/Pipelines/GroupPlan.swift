import SyncHealthCore
import SyncHealthStore

/// The new states of one group (queued requests, due timers, settling lines), computed on copies and written
/// in one transaction; the local pipeline installs it in its cache only after the commit.
///
/// A value with no I/O: `make` reads a device table and decides on the notification policy in place (copying the
/// policy costs in proportion to the alerts of the last hour); the caller takes those decisions back if the
/// commit fails.
struct GroupPlan {
    /// A device the group changed, or looked at to settle a line.
    struct Touched {
        /// Its position in the table, or `nil` for a new device.
        var index: Int?
        var record: DeviceRecord
        /// Its part of the fleet counters: as counted before the group until `count()`, then after.
        var contribution: FleetContribution
        /// When its timers next need it.
        var deadline: Timestamp?
        /// Why it leaves the store, if it does (`DeviceRemoval`).
        var removal: DeviceRemoval.Reason?
    }

    /// A device's part of the counters before the group (`nil`: new) and after it (`nil`: it left), and when it was
    /// first and last seen (release counters note them).
    struct CounterMove {
        var old: FleetContribution?
        var new: FleetContribution?
        var firstSeenAt: Timestamp
        var lastSeenAt: Timestamp
    }

    /// An alert that fired or resolved in the group.
    struct Transition: Equatable {
        var id: String
        var kind: AlertKind
        var change: AlertTransition.Change
    }

    /// What to write. Its `eventIds` stay empty: a store records the claimed ids itself
    /// (`GroupCommitter.append(_:at:)`), and the shared pipeline sets them from `StoreChanges.newIds`.
    var changes: StoreChanges
    /// One per request, in order.
    var receipts: [IngestReceipt] = []
    /// In first-touch order.
    var touched: [Touched] = []
    /// How each device the group touched moves in the fleet and release counters, in order: the local pipeline
    /// applies them to its counters in place (`LocalCache.install`), the shared one writes their sum
    /// (`counterDeltas`). Not a copy of the counters, changed: a copy's first change rewrites it whole, every scope
    /// and release of every app, for a group that touched one device.
    var moves: [CounterMove] = []
    var fleetAlerts: FleetAlerts
    var transitions: [Transition] = []
    /// Containers a touched device left or joined, sorted: the fleet rule is evaluated for these.
    var containers: [String] = []
    /// Per erasure asked for, whether its device was stored (or created in the group).
    var erased: [Bool] = []

    /// Plans a group over `devices`, deciding on `policy` in place.
    ///
    /// - Parameters:
    ///   - seen: per batch, the ids its device sent before this group.
    ///   - due: positions in `devices` whose timers came due; those not seen for `forgetAfter` are forgotten.
    ///   - erasures: devices to erase, after the requests (`DeviceRemoval`).
    ///   - subscribers: the subscriptions that want an alert.
    static func make(
        batches: some Collection<EventBatch>,
        seen: [Set<String>],
        due: [Int],
        erasures: [DeviceKey] = [],
        devices: DeviceTable,
        fleetAlerts: FleetAlerts,
        policy: inout NotificationPolicy,
        now: Timestamp,
        configuration: EngineConfiguration,
        subscribers: @escaping (AlertRecord, AlertContext) -> [WebhookSubscription]
    ) -> GroupPlan {
        var planner = GroupPlanner(
            devices: devices,
            now: now,
            configuration: configuration,
            subscribers: subscribers,
            plan: GroupPlan(changes: StoreChanges(recordedAt: now), fleetAlerts: fleetAlerts)
        )
        planner.apply(batches, seen: seen, policy: &policy)
        planner.evaluate(due: due, policy: &policy)
        planner.settle(policy: &policy)
        planner.erase(erasures)
        planner.count()
        return planner.plan
    }
}

/// Builds a `GroupPlan` step by step.
private struct GroupPlanner {
    let devices: DeviceTable
    let now: Timestamp
    let configuration: EngineConfiguration
    let subscribers: (AlertRecord, AlertContext) -> [WebhookSubscription]
    var plan: GroupPlan
    /// Each touched device's place in `plan.touched`.
    var slot: [DeviceKey: Int] = [:]

    init(
        devices: DeviceTable,
        now: Timestamp,
        configuration: EngineConfiguration,
        subscribers: @escaping (AlertRecord, AlertContext) -> [WebhookSubscription],
        plan: GroupPlan
    ) {
        self.devices = devices
        self.now = now
        self.configuration = configuration
        self.subscribers = subscribers
        self.plan = plan
    }

    /// The slot of `key`, touching it first if needed: a new device starts as `make()` builds it. Its `deadline` is
    /// left for the caller to set, unless `keepingTimers` (a device touched only to settle a line keeps its timers).
    mutating func touch(_ key: DeviceKey, keepingTimers: Bool = false, make: () -> DeviceRecord) -> Int {
        if let s = slot[key] { return s }
        let index = devices.index[key]
        let record = index.map { devices.records[$0] } ?? make()
        let contribution = index.map { devices.contributions[$0] } ?? record.fleetContribution(now: now, configuration: configuration.alerts)
        var deadline: Timestamp?
        if keepingTimers {
            // Start from what its timers are now.
            var probe = record
            let evaluation = probe.evaluateAlerts(now: now, configuration: configuration.alerts)
            deadline = evaluation.transitions.isEmpty ? configuration.deadline(evaluation.nextDeadline, for: record) : now
        }
        plan.touched.append(GroupPlan.Touched(index: index, record: record, contribution: contribution, deadline: deadline))
        slot[key] = plan.touched.count - 1
        return plan.touched.count - 1
    }

    /// Records a device's transitions, and the messages the policy lets through; `reason` says why resolves
    /// happened when their conditions did not end.
    mutating func record(
        _ transitions: [AlertTransition],
        of device: DeviceRecord,
        policy: inout NotificationPolicy,
        reason: ResolveReason? = nil
    ) {
        for transition in transitions {
            var alert = AlertText.record(for: transition, device: device)
            if let reason { alert = AlertText.resolved(alert, because: reason, configuration: configuration) }
            plan.changes.alerts.append(alert)
            plan.transitions.append(GroupPlan.Transition(id: alert.id, kind: alert.kind, change: transition.change))
            let line = AlertLine.device(device.key, alert.kind)
            switch policy.decide(key: line, transition: transition, now: now) {
            case .deliver(let flapping):
                let told = flapping ? AlertText.flapping(alert, configuration: configuration.notifications) : alert
                let context = AlertContext(device: device)
                plan.changes.outbox += OutboxBuilder.messages(
                    for: told,
                    change: transition.change,
                    line: line,
                    context: context,
                    subscribers: subscribers(told, context),
                    now: now,
                    publicURL: configuration.publicURL
                )
            case .suppressFlapping:
                break
            }
        }
    }

    /// Applies the requests. A device's requests in one group are applied together, at its last one, and evaluated
    /// once: every transition of the group happens at `now`, so a fire, resolve and fire again would be one
    /// incident id.
    mutating func apply(_ batches: some Collection<EventBatch>, seen: [Set<String>], policy: inout NotificationPolicy) {
        // A device with several requests in the group: the ids its earlier requests brought are duplicates in the
        // later ones. Kept only for such devices; most have one request.
        var requestsOf: [DeviceKey: Int] = [:]
        for batch in batches { requestsOf[batch.key, default: 0] += 1 }
        var seenInGroup: [DeviceKey: Set<String>] = [:]
        var gathered: [DeviceKey: (events: [DeviceEvent], requests: Int, attested: Bool)] = [:]

        for (batch, seenIds) in zip(batches, seen) {
            let key = batch.key
            let now = now
            let s = touch(key) { DeviceRecord(key: key, info: batch.info, firstSeenAt: now) }
            let requests = requestsOf[key, default: 0]
            let (fresh, duplicates): ([DeviceEvent], Int)
            if requests > 1 {
                var inGroup = seenInGroup[key] ?? []
                (fresh, duplicates) = batch.events.removingDuplicates { seenIds.contains($0) || inGroup.contains($0) }
                for event in fresh { inGroup.insert(event.eventId) }
                seenInGroup[key] = inGroup
            } else {
                (fresh, duplicates) = batch.events.removingDuplicates { seenIds.contains($0) }
            }
            plan.receipts.append(IngestReceipt(accepted: fresh.count, duplicates: duplicates))
            var events = fresh
            // A device's requests gathered in one group are attested only if each of them is.
            var attested = batch.attested
            if requests > 1 {
                let earlier = gathered[key, default: (events: [], requests: 0, attested: true)]
                guard earlier.requests + 1 == requests else {
                    gathered[key] = (earlier.events + fresh, earlier.requests + 1, earlier.attested && batch.attested)
                    continue
                }
                events = earlier.events + fresh
                attested = earlier.attested && batch.attested
            }
            var device = plan.touched[s].record
            let result = device.ingest(
                events,
                info: batch.info,
                attested: attested,
                now: now,
                skew: configuration.skew,
                configuration: configuration.alerts
            )
            record(result.transitions, of: device, policy: &policy)
            plan.touched[s].record = device
            plan.touched[s].deadline = configuration.deadline(result.nextDeadline, for: device)
        }
    }

    /// Evaluates the devices whose timers came due, and forgets those not seen for `forgetAfter`.
    mutating func evaluate(due: [Int], policy: inout NotificationPolicy) {
        for i in due {
            let stored = devices.records[i]
            let s = touch(stored.key) { stored }
            guard plan.touched[s].removal == nil else { continue }
            var device = plan.touched[s].record
            if configuration.isForgotten(device, now: now) {
                forget(s, policy: &policy)
                continue
            }
            let evaluation = device.evaluateAlerts(now: now, configuration: configuration.alerts)
            record(evaluation.transitions, of: device, policy: &policy)
            plan.touched[s].record = device
            plan.touched[s].deadline = configuration.deadline(evaluation.nextDeadline, for: device)
        }
    }

    /// Forgets a device: its firing alerts resolve (`reason` `forgotten`, told like any resolve), then it leaves.
    mutating func forget(_ s: Int, policy: inout NotificationPolicy) {
        let device = plan.touched[s].record
        let resolves = device.firingAlerts.map { AlertTransition(kind: $0.kind, change: .resolve, startsAt: $0.startsAt, endsAt: now) }
        record(resolves, of: device, policy: &policy, reason: .forgotten)
        plan.touched[s].removal = .forgotten
        plan.touched[s].deadline = nil
    }

    /// Erases devices, after everything else in the group: nothing about them is told, and the store deletes
    /// their alerts and queued messages with them (`DeviceRemoval`).
    mutating func erase(_ keys: [DeviceKey]) {
        for key in keys {
            guard slot[key] != nil || devices.index[key] != nil else {
                plan.erased.append(false)
                continue
            }
            let now = now
            let s = touch(key) { DeviceRecord(key: key, firstSeenAt: now) }
            plan.touched[s].removal = .erased
            plan.touched[s].deadline = nil
            plan.erased.append(true)
        }
    }

    /// Flapping alerts that have been quiet for a window: tells ops the state they have not heard.
    mutating func settle(policy: inout NotificationPolicy) {
        for (line, transition) in policy.settle(now: now) {
            guard let key = line.deviceKey, let i = devices.index[key] else { continue }
            let stored = devices.records[i]
            let s = touch(key, keepingTimers: true) { stored }
            guard plan.touched[s].removal == nil else { continue }
            let alert = AlertText.record(for: transition, device: plan.touched[s].record)
            let context = AlertContext(device: plan.touched[s].record)
            plan.changes.outbox += OutboxBuilder.messages(
                for: alert,
                change: transition.change,
                line: line,
                context: context,
                subscribers: subscribers(alert, context),
                now: now,
                publicURL: configuration.publicURL
            )
        }
    }

    /// How the group moves the counters, and the containers whose fleet rule must be evaluated. A device that leaves
    /// takes its part of the counters with it.
    mutating func count() {
        var containers = Set<String>()
        for s in plan.touched.indices {
            let item = plan.touched[s]
            let old = item.index.map { _ in item.contribution }
            let new = item.removal == nil ? item.record.fleetContribution(now: now, configuration: configuration.alerts) : nil
            plan.moves.append(GroupPlan.CounterMove(old: old, new: new, firstSeenAt: item.record.firstSeenAt, lastSeenAt: item.record.lastSeenAt))
            if let c = old?.containerId { containers.insert(c) }
            if let c = new?.containerId, c != old?.containerId { containers.insert(c) }
            if let new { plan.touched[s].contribution = new }
        }
        plan.containers = containers.sorted()
        plan.changes.devices = plan.touched.filter { $0.removal == nil }.map(\.record)
        for item in plan.touched {
            if item.removal == nil, let deadline = item.deadline { plan.changes.deadlines[item.record.key] = deadline }
            // A device created in this group and erased in it is still written as a removal: the store forgets the
            // ids the group records for it.
            if let reason = item.removal, item.index != nil || reason == .erased {
                plan.changes.removals.append(DeviceRemoval(key: item.record.key, reason: reason))
            }
        }
    }
}

extension GroupPlan {
    /// The group's changes to the fleet counters, as counters that start empty.
    var counterDeltas: FleetCounters {
        var deltas = FleetCounters()
        for move in moves { deltas.replace(move.old, with: move.new) }
        return deltas
    }

    /// The group's changes to the counts of each container it moved a device out of or into.
    private var containerDeltas: [String: FleetCounts] {
        var deltas: [String: FleetCounts] = [:]
        for move in moves where move.old != move.new {
            if let old = move.old, let c = old.containerId { deltas[c, default: FleetCounts()].add(old, -1) }
            if let new = move.new, let c = new.containerId { deltas[c, default: FleetCounts()].add(new, 1) }
        }
        return deltas
    }

    /// Evaluates the fleet rule of every container the group touched, on their counts after the group: `before`,
    /// as the counters had them, plus the group's own moves.
    mutating func evaluateFleet(
        before countsBefore: (String) -> FleetCounts,
        now: Timestamp,
        configuration: EngineConfiguration,
        subscribers: (AlertRecord, AlertContext) -> [WebhookSubscription]
    ) {
        let deltas = containers.isEmpty ? [:] : containerDeltas
        for container in containers {
            var counts = countsBefore(container)
            if let delta = deltas[container] { counts.add(delta) }
            guard let transition = fleetAlerts.evaluate(containerId: container, counts: counts, now: now, configuration: configuration.alerts) else {
                continue
            }
            let alert = AlertText.record(for: transition, containerId: container, counts: counts)
            changes.alerts.append(alert)
            changes.fleetAlerts.append((container, transition.change == .fire ? transition.startsAt : nil))
            transitions.append(Transition(id: alert.id, kind: .fleetDegraded, change: transition.change))
            changes.outbox += OutboxBuilder.messages(
                for: alert,
                change: transition.change,
                line: .container(container),
                context: .fleet,
                subscribers: subscribers(alert, .fleet),
                now: now,
                publicURL: configuration.publicURL
            )
        }
    }
}
