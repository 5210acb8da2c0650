import SyncHealthCore
import SyncHealthStore

/// What a replica remembers of the shared store between its groups, so that a group can skip its read: planned on
/// the devices, counts and fleet alerts as this replica last read or wrote them, and sent as one guarded write.
///
/// Nothing here is trusted for correctness. The write is refused whole when a device's version, a fleet alert or
/// an event id is not what the group planned on (another replica wrote first, or the device was stored though it
/// was missing here), and the group is then read and planned again. What the cache decides is only whether to try:
/// it writes first while that seldom fails, measured as it goes.
struct SharedCache {
    /// Devices as last read or written here, with their versions.
    private(set) var devices: [DeviceKey: StoredDevice] = [:]
    /// Counts by container (all apps, every shard), as last read plus this replica's deltas since.
    private(set) var counts: [String: FleetCounts] = [:]
    /// Every firing fleet alert as last read or written here; `nil` before the first read.
    private(set) var fleetAlerts: [String: Timestamp]?
    /// Of the devices missing here when a group read them, the share the store had (a moving average). High after
    /// a restart, when the store knows devices this replica has not met; low while new devices arrive.
    private(set) var storedShareOfMissing = 1.0
    /// Of the groups that wrote first, the share whose write was refused (a moving average). High when replicas
    /// take turns with the same devices.
    private(set) var refusedShare = 0.0
    /// Most devices kept; beyond it, some are forgotten (and read again when they return). With 0, every group
    /// reads first.
    let capacity: Int

    /// Above either share, groups read first.
    static let trustLimit = 0.2
    /// The weight of the newest sample in the moving averages.
    static let sampleWeight = 0.1

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    /// What a group of `claims` (and the further `keys`) plans on without reading, or `nil` when it should read:
    /// some of its devices are missing here and missing devices are usually stored, writes first are often
    /// refused, or the fleet alerts were never read. Missing devices count as new; every event id as new.
    func snapshot(keys: [DeviceKey], claims: [EventIdClaim]) -> GroupSnapshot? {
        guard capacity > 0, let fleetAlerts, refusedShare < Self.trustLimit else { return nil }
        var snapshot = GroupSnapshot()
        for key in keys {
            if let stored = devices[key] {
                snapshot.devices.append(stored)
            } else if storedShareOfMissing >= Self.trustLimit {
                return nil
            }
        }
        snapshot.seen = claims.map { _ in [] }
        snapshot.counts = counts
        snapshot.fleetAlerts = fleetAlerts
        return snapshot
    }

    /// Whether the counts of these containers are known here (a plan evaluates their fleet rules on them).
    func knowsCounts(of containers: [String]) -> Bool {
        containers.allSatisfy { counts[$0] != nil }
    }

    /// Takes in a read of `keys`, of which `missing` were not here before it. Each read also lets the refused
    /// share fade, so that a replica that went back to reading tries writing first again after a while (a
    /// refusal a few dozen groups is the price of finding out that the conflicts are over).
    mutating func learn(_ snapshot: GroupSnapshot, keys: [DeviceKey], missing: [DeviceKey]) {
        refusedShare *= 1 - Self.sampleWeight / 4
        var stored = Set<DeviceKey>()
        for device in snapshot.devices + snapshot.due {
            devices[device.record.key] = device
            stored.insert(device.record.key)
        }
        for key in keys where !stored.contains(key) { devices[key] = nil }
        if !missing.isEmpty {
            let share = Double(missing.count { stored.contains($0) }) / Double(missing.count)
            storedShareOfMissing += Self.sampleWeight * (share - storedShareOfMissing)
        }
        counts.merge(snapshot.counts) { _, read in read }
        fleetAlerts = snapshot.fleetAlerts
        trim()
    }

    /// Takes in a write that the store accepted: its devices at their new versions, its counter deltas and its
    /// fleet alerts.
    mutating func wrote(_ write: GroupWrite) {
        for record in write.changes.devices {
            devices[record.key] = StoredDevice(
                record: record,
                countedAt: write.changes.recordedAt,
                version: (write.versions[record.key] ?? 0) + 1
            )
        }
        for (scope, deltas) in write.counters.touchedScopes where scope.appId == nil {
            guard let container = scope.containerId else { continue }
            counts[container]?.add(deltas)
        }
        for (container, startsAt) in write.changes.fleetAlerts { fleetAlerts?[container] = startsAt }
        for removal in write.changes.removals { devices[removal.key] = nil }
        trim()
    }

    /// Counts a write first: refused or not.
    mutating func wroteFirst(refused: Bool) {
        refusedShare += Self.sampleWeight * ((refused ? 1 : 0) - refusedShare)
    }

    /// Forgets a tenth of the devices when there are more than `capacity`.
    private mutating func trim() {
        guard devices.count > capacity else { return }
        let keep = capacity - capacity / 10
        devices = Dictionary(uniqueKeysWithValues: devices.prefix(keep).map { ($0.key, $0.value) })
    }
}
