public import Logging
public import ServiceLifecycle
public import SyncHealthCore
public import SyncHealthStore
import SyncHealthWebhooks

/// What the services beside the engine read of it (the incident and release watches, silences' release,
/// Alertmanager's refresh, the fleet history, the live feed's tick and follower): its clock, tunables and readiness,
/// its store, its alerts, devices and counters, and its live feed. A watch neither ingests nor erases, so it takes
/// this, not the whole `MonitorEngine`.
public protocol EngineReads: Sendable {
    /// The service's clock.
    var clock: any ServiceClock { get }
    /// Tunables.
    var configuration: EngineConfiguration { get }
    /// Whether the state is loaded and the pipeline runs.
    var isReady: Bool { get }
    /// Alert transitions and fleet-summary changes, as they happen, for live views.
    var feed: LiveFeed { get }
    /// The store the engine commits to: what the watches beside it (incidents, releases, silences) read and write.
    var syncStore: any SyncStore { get }

    /// The devices among `keys` that exist, in one read whatever their number.
    func records(_ keys: [DeviceKey]) async throws(EngineError) -> [DeviceKey: DeviceRecord]
    /// The counters of every scope with devices.
    func summaries() async throws(EngineError) -> [FleetScope: FleetCounts]
    /// Every app's releases by app version, for the metrics: live on the embedded store, at most a minute old on a
    /// shared one (which counts them from every device).
    func appVersions() async throws(EngineError) -> [String: [String: ReleaseCounts]]
    /// A page of alerts, newest first.
    func alerts(_ query: AlertQuery) async throws(EngineError) -> AlertPage
}

/// The running monitor, as the HTTP routes and the other services use it: ingestion and reads. What tells ops (the
/// silences, the subscriptions, the outbox's sender) is built beside it (`Delivery`). Two types implement it, one
/// per kind of store:
///
/// - `LocalMonitor`, over a store that one process owns (SQLite, or memory in tests): every device is cached in
///   memory, and the cache is the authority between commits.
/// - `SharedMonitor`, over a store that several replicas share (PostgreSQL): the database is the authority. A
///   replica plans a group on the devices as it last read or wrote them (`SharedCache`) and writes first: the
///   guarded write, refused if any of them changed meanwhile, is the group's one round trip. Refused, or on devices
///   it does not know, it reads them and plans again.
///
/// Both run as a service: `run()` loads or prepares the store, then commits groups (queued requests, due timers,
/// erasures) until graceful shutdown, and commits what was accepted before it returns. Both plan with the same
/// `GroupPlan` (docs/architecture.md#two-pipelines-one-protocol).
public protocol MonitorEngine: Service, EngineReads {
    /// Applies a decoded batch and returns once it is durable.
    ///
    /// - Throws: `EngineError.overloaded` when too many requests wait, `.stopping` during shutdown,
    ///   `.storeUnavailable` when the commit failed (nothing was applied).
    func ingest(_ batch: EventBatch) async throws(EngineError) -> IngestReceipt
    /// A device's state now, or `nil` if unknown.
    func device(_ key: DeviceKey) async throws(EngineError) -> DeviceSnapshot?
    /// Every device with `deviceId`, in any app (for lookups that leave out the app).
    func devices(withId deviceId: String) async throws(EngineError) -> [DeviceKey]
    /// A page of devices matching `filter`, in first-seen order.
    func devices(_ filter: DeviceFilter, after cursor: Int, limit: Int) async throws(EngineError) -> DevicePage
    /// The fleet counters of a scope, O(1) in the fleet's size.
    func summary(_ scope: FleetScope) async throws(EngineError) -> FleetCounts
    /// An app's releases along `dimension` (`""`: devices that reported none), with their counters.
    func releases(appId: String, by dimension: ReleaseDimension) async throws(EngineError) -> [String: ReleaseCounts]
    /// Erases a device (`DeviceRemoval.Reason.erased`): its record, counts, list entries, alerts, queued webhook
    /// messages and event ids. Returns once that is committed, whether the device was stored.
    func erase(_ key: DeviceKey) async throws(EngineError) -> Bool
    /// The stored fleet history of a scope, oldest first.
    func history(_ scope: FleetScope, resolution: HistoryResolution, from: Timestamp, to: Timestamp) async throws(EngineError) -> [HistoryPoint]
}

extension EngineReads {
    /// The clock's current time.
    public var now: Timestamp { clock.now }
}

/// The store an engine runs over, which decides its pipeline.
public enum MonitorStore: Sendable {
    /// A store one process owns: `LocalMonitor`.
    case local(any LocalSyncStore)
    /// A store several replicas share: `SharedMonitor`.
    case shared(any SharedSyncStore)

    /// The store.
    public var store: any SyncStore {
        switch self {
        case .local(let store): store
        case .shared(let store): store
        }
    }

    /// Whether several replicas share the store.
    public var isShared: Bool {
        if case .shared = self { return true }
        return false
    }

    /// Builds the engine for this store, over the delivery parts built beside it (`makeDelivery`).
    public func makeEngine(
        clock: any ServiceClock,
        configuration: EngineConfiguration,
        delivery: Delivery,
        logger: Logger
    ) -> any MonitorEngine {
        switch self {
        case .local(let store):
            return LocalMonitor(store: store, clock: clock, configuration: configuration, delivery: delivery, logger: logger)
        case .shared(let store):
            return SharedMonitor(store: store, clock: clock, configuration: configuration, delivery: delivery, logger: logger)
        }
    }
}

/// A device's state as the API shows it.
public struct DeviceSnapshot: Sendable {
    /// The record.
    public var record: DeviceRecord
    /// Whether the device is silent now.
    public var silent: Bool
    /// Its firing alerts.
    public var alerts: [AlertRecord]

    init(record: DeviceRecord, now: Timestamp, configuration: AlertConfiguration) {
        self.record = record
        self.silent = record.isSilent(now: now, configuration: configuration)
        self.alerts = AlertText.firing(record)
    }
}

/// Filters of `GET /v1/devices`.
public struct DeviceFilter: Sendable {
    /// Only this summary value.
    public var summary: SyncStateSummary?
    /// Only broken (`true`) or only not broken (`false`) devices.
    public var broken: Bool?
    /// Only this app.
    public var appId: String?
    /// Only this container.
    public var containerId: String?
    /// Only this platform (`iOS`, `macOS`, …).
    public var platform: String?
    /// Only this OS version.
    public var osVersion: String?
    /// Only this app version.
    public var appVersion: String?

    /// Creates a filter.
    public init(
        summary: SyncStateSummary? = nil,
        broken: Bool? = nil,
        appId: String? = nil,
        containerId: String? = nil,
        platform: String? = nil,
        osVersion: String? = nil,
        appVersion: String? = nil
    ) {
        self.summary = summary
        self.broken = broken
        self.appId = appId
        self.containerId = containerId
        self.platform = platform
        self.osVersion = osVersion
        self.appVersion = appVersion
    }

    /// Whether any filter needs the device's info beyond its fleet contribution.
    var filtersInfo: Bool { platform != nil || osVersion != nil || appVersion != nil }

    /// Whether a device's info matches the platform and version filters.
    func matches(_ info: DeviceInfo) -> Bool {
        if let platform, info.platform != platform { return false }
        if let osVersion, info.osVersion != osVersion { return false }
        if let appVersion, info.appVersion != appVersion { return false }
        return true
    }

    /// Whether a device matches, from its fleet contribution alone (which carries its app, container and summary).
    func matches(_ contribution: FleetContribution) -> Bool {
        if let appId, contribution.appId != appId { return false }
        if let containerId, contribution.containerId != containerId { return false }
        if let summary, contribution.summary != summary { return false }
        if let broken, contribution.summary.isBroken != broken { return false }
        return true
    }

    /// The same filters, as a shared store's query.
    var query: DeviceQuery {
        DeviceQuery(appId: appId, containerId: containerId, summary: summary, broken: broken)
    }
}

/// A page of devices.
public struct DevicePage: Sendable {
    /// The devices.
    public var devices: [DeviceSnapshot]
    /// Where the next page starts, or `nil` at the end.
    public var nextCursor: Int?
}
