public import SyncHealthCore

/// A store that several service processes (replicas) use at once, such as PostgreSQL.
///
/// A group plans on the devices as read (or as its replica last read or wrote them) and writes them back only if
/// no other writer changed them in between (optimistic: no lock is held between the read and the write, so
/// replicas never wait on each other for different devices). Every read goes to the store. The
/// store also keeps what a single process keeps in memory otherwise: the alert timers (a due time per device) and
/// the fleet counters, which each replica adds to in a shard of its own.
public protocol SharedSyncStore: SyncStore {
    /// Waits for the database and brings its schema up to date. Called once before anything else.
    func prepare() async throws

    /// Runs one commit group's reads and writes, and counts the round trips they took.
    func group<T: Sendable>(_ body: (any SharedGroup) async throws -> T) async throws -> T

    /// Tells the others this replica is alive, and folds into a common shard the counters of replicas that have
    /// not said so since `deadBefore`.
    func heartbeat(now: Timestamp, deadBefore: Timestamp) async throws

    /// One device.
    func device(_ key: DeviceKey) async throws -> DeviceRecord?

    /// The devices among `keys` that exist, in one read whatever their number.
    func devices(_ keys: [DeviceKey]) async throws -> [DeviceKey: DeviceRecord]

    /// Every device with this id, in any app.
    func deviceKeys(deviceId: String) async throws -> [DeviceKey]

    /// A page of devices in first-seen order, after the position `cursor` (0 for the first page), with each
    /// device's position (a cursor that resumes after it).
    func devices(
        _ query: DeviceQuery,
        after cursor: Int64,
        limit: Int
    ) async throws -> (records: [DeviceRecord], positions: [Int64], nextCursor: Int64?)

    /// The stored counters of a scope.
    func counts(_ scope: FleetScope) async throws -> FleetCounts

    /// The stored counters of every scope with devices.
    func allCounts() async throws -> [FleetScope: FleetCounts]

    /// The earliest due time of any device's timers.
    func nextDeviceDeadline() async throws -> Timestamp?

    /// Runs `body` with the notices of alert transitions as every replica commits them, in commit order, once
    /// `body` is called nothing committed after is missed. Returns when `body` does; throws when the connection that
    /// listens fails (notices may then have been missed).
    func followTransitions(_ body: @Sendable (_ notices: AsyncThrowingStream<TransitionNotice, any Error>) async throws -> Void) async throws

    /// The alerts with these ids that exist.
    func alerts(ids: [String]) async throws -> [AlertRecord]

    /// Deletes the event ids recorded for an erased device up to `recordedThrough` (the group that erased it), so
    /// that the ids it sends later are kept. Outside any group: it reads the whole id table.
    func eraseEventIds(of key: DeviceKey, recordedThrough: Timestamp) async throws
}

/// The filters a shared store applies to a device listing.
public struct DeviceQuery: Sendable, Hashable {
    /// Only this app.
    public var appId: String?
    /// Only this container.
    public var containerId: String?
    /// Only this summary.
    public var summary: SyncStateSummary?
    /// Only broken (`true`) or only not broken (`false`) devices.
    public var broken: Bool?

    /// Creates a query.
    public init(appId: String? = nil, containerId: String? = nil, summary: SyncStateSummary? = nil, broken: Bool? = nil) {
        self.appId = appId
        self.containerId = containerId
        self.summary = summary
        self.broken = broken
    }
}

/// One commit group's access to a shared store: one read and one write, each a single round trip (and a read of
/// the subscriptions when they changed).
public protocol SharedGroup: Sendable {
    /// What a group plans on; due timers it returns are claimed (hidden from other replicas) for a lease.
    func read(_ request: GroupRead) async throws -> GroupSnapshot

    /// Writes the group, all or nothing. Returns `false`, having written nothing, when a device or fleet alert
    /// changed since `read` (another replica wrote it): read again and plan again.
    func write(_ write: GroupWrite) async throws -> Bool

    /// The webhook subscriptions, when `GroupSnapshot.subscriptionsDigest` says they changed: a third round trip.
    func webhooks() async throws -> [WebhookSubscription]
}

/// What a group reads.
public struct GroupRead: Sendable {
    /// The devices of its requests (and of lines to settle).
    public var keys: [DeviceKey]
    /// Per request, its device and the event ids it claims.
    public var claims: [EventIdClaim]
    /// The service clock.
    public var now: Timestamp
    /// At most this many due devices.
    public var dueLimit: Int
    /// Containers whose counts are wanted besides those of the devices read; `nil` for every container.
    public var containers: [String]?

    /// Creates a read.
    public init(keys: [DeviceKey], claims: [EventIdClaim], now: Timestamp, dueLimit: Int, containers: [String]?) {
        self.keys = keys
        self.claims = claims
        self.now = now
        self.dueLimit = dueLimit
        self.containers = containers
    }
}

/// What a group plans on.
public struct GroupSnapshot: Sendable {
    /// The stored devices among the keys read.
    public var devices: [StoredDevice] = []
    /// Devices whose timers came due, claimed for this group.
    public var due: [StoredDevice] = []
    /// Per claim, the ids its device sent before.
    public var seen: [Set<String>] = []
    /// The counts of the containers read (all apps), summed over every replica's shard.
    public var counts: [String: FleetCounts] = [:]
    /// Every firing fleet alert, by container.
    public var fleetAlerts: [String: Timestamp] = [:]
    /// A digest of the webhook subscriptions as stored: when it changes, another replica changed them.
    public var subscriptionsDigest: String?

    /// Creates an empty snapshot.
    public init() {}
}

/// What a group writes, with what it was planned on.
public struct GroupWrite: Sendable {
    /// The changes.
    public var changes: StoreChanges
    /// Each written device's version as read (0: not stored).
    public var versions: [DeviceKey: Int64]
    /// The fleet alerts as read, for the containers whose fleet alert the changes start or end.
    public var fleetAlertsRead: [String: Timestamp]
    /// Deltas to add to the counters.
    public var counters: FleetCounters
    /// The devices whose timers the group claimed: their deadlines are written as planned. Any other device's
    /// stored deadline only moves earlier (its timers may wake early, which is harmless).
    public var claimedTimers: Set<DeviceKey>

    /// Creates a write.
    public init(
        changes: StoreChanges,
        versions: [DeviceKey: Int64],
        fleetAlertsRead: [String: Timestamp],
        counters: FleetCounters,
        claimedTimers: Set<DeviceKey> = []
    ) {
        self.changes = changes
        self.versions = versions
        self.fleetAlertsRead = fleetAlertsRead
        self.counters = counters
        self.claimedTimers = claimedTimers
    }
}

/// A device as a shared store holds it.
public struct StoredDevice: Sendable {
    /// The record.
    public var record: DeviceRecord
    /// The time its contribution to the stored counters was computed at.
    public var countedAt: Timestamp
    /// Its version, one more each write: a write planned on another version is refused.
    public var version: Int64

    /// Creates one.
    public init(record: DeviceRecord, countedAt: Timestamp, version: Int64) {
        self.record = record
        self.countedAt = countedAt
        self.version = version
    }
}

/// What a shared store tells of one alert's row as it commits (`SharedSyncStore.followTransitions`).
public enum TransitionNotice: Sendable, Equatable {
    /// The alert fired (`firing`) or resolved.
    case transition(alertId: String, state: AlertState)
    /// The alert's row was deleted: an erasure (`wasFiring` for a firing one), or history past its retention.
    case deleted(alertId: String, wasFiring: Bool)

    /// Reads a notice's payload: `f`, `r`, `d` (a firing alert deleted) or `x` (a resolved one deleted), a space,
    /// the alert's id.
    public init?(payload: String) {
        let parts = payload.split(separator: " ", maxSplits: 1)
        guard parts.count == 2 else { return nil }
        let id = String(parts[1])
        switch parts[0] {
        case "f": self = .transition(alertId: id, state: .firing)
        case "r": self = .transition(alertId: id, state: .resolved)
        case "d": self = .deleted(alertId: id, wasFiring: true)
        case "x": self = .deleted(alertId: id, wasFiring: false)
        default: return nil
        }
    }
}
