public import SyncHealthCore

/// A store that several service processes (replicas) use at once, such as PostgreSQL.
///
/// Nothing is cached across requests in this mode: every write reads the devices it changes inside one
/// transaction, under row locks, and every read goes to the store. The store also keeps what a single
/// process keeps in memory otherwise: the alert timers (a due time per device) and the fleet counters.
public protocol SharedSyncStore: SyncStore {
    /// Waits for the database and brings its schema up to date. Called once before anything else.
    func prepare() async throws

    /// Runs `body` in one transaction, committed when it returns. A transaction that loses a deadlock or a
    /// serialization conflict is retried from the start, so `body` must not have effects outside it.
    func transaction<T: Sendable>(_ body: @Sendable (any SharedTransaction) async throws -> T) async throws -> T

    /// One device.
    func device(_ key: DeviceKey) async throws -> DeviceRecord?

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

/// The operations of one shared-store transaction, in the order the engine uses them. Locks are held until
/// the transaction ends; taking them in this order keeps replicas free of lock cycles.
public protocol SharedTransaction: Sendable {
    /// Locks the devices (present or not yet stored) against every other writer, and returns the stored ones.
    func lockDevices(_ keys: [DeviceKey]) async throws -> [DeviceKey: StoredDevice]

    /// Claims up to `limit` devices whose timers are due at `now` and that no other transaction holds.
    func claimDueDevices(now: Timestamp, limit: Int) async throws -> [StoredDevice]

    /// For each (device, candidate ids) pair, the ids already recorded for that device.
    func seenEventIds(_ requests: [(key: DeviceKey, eventIds: [String])]) async throws -> [Set<String>]

    /// Adds deltas to the stored counters, then returns the counts of these containers (all apps), locked.
    func addCounts(_ deltas: FleetCounters, returning containers: [String]) async throws -> [String: FleetCounts]

    /// The firing fleet alerts of these containers.
    func fleetAlerts(_ containers: [String]) async throws -> [String: Timestamp]

    /// Writes the changes. A device's stored contribution to the counters is taken as computed at
    /// `changes.recordedAt`.
    func write(_ changes: StoreChanges) async throws
}

/// A device as a shared store holds it.
public struct StoredDevice: Sendable {
    /// The record.
    public var record: DeviceRecord
    /// The time its contribution to the stored counters was computed at.
    public var countedAt: Timestamp

    /// Creates one.
    public init(record: DeviceRecord, countedAt: Timestamp) {
        self.record = record
        self.countedAt = countedAt
    }
}
