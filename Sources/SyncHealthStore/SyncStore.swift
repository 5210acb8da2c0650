public import SyncHealthCore

/// One device's event ids in a request, as the store's dedupe reads and records them.
public typealias EventIdClaim = (key: DeviceKey, eventIds: [String])

/// The durable store behind the service. The store is the truth: the service may cache hot state in memory,
/// but rebuilds it from `loadState()` at start.
///
/// The atomic unit is one `StoreChanges`: "these events were applied to these devices, with these resulting
/// states, alert transitions and outbox rows", all durable or none of it. How a group commits depends on who else
/// writes: a store one process owns commits series of groups (`LocalSyncStore.commitSeries`), a store replicas
/// share takes a read and a guarded write (`SharedSyncStore.group`). This protocol holds what both kinds serve.
public protocol SyncStore: WebhookStore, SilenceStore, HistoryStore, IncidentStore, AccessStore, AttestationStore {
    /// Everything the service needs to rebuild its cache: devices in insertion order, firing fleet alerts.
    func loadState() async throws -> PersistedState

    /// A page of alerts, newest first.
    func alerts(_ query: AlertQuery) async throws -> AlertPage

    /// About the last `limit` alert transitions, oldest first, for live views to resume from after a restart: each
    /// alert's fire (`firing`, no end) at its start and its resolve at its end, in that order, from the newest
    /// alerts and the newest resolves (`AlertTransitions.recent`).
    func recentTransitions(limit: Int) async throws -> [AlertRecord]

    /// Forgets at most `limit` of the event ids recorded before `cutoff` (the dedupe retention window), in one
    /// short transaction. Returns how many; fewer than `limit` means none is left. The engine calls it between
    /// groups, so that forgetting an hour of ids never holds up ingestion for long.
    func pruneEventIds(recordedBefore cutoff: Timestamp, limit: Int) async throws -> Int

    /// Forgets history older than `cutoff`, at most `limit` rows of each kind, in one short transaction: resolved
    /// alerts that ended before it, webhook delivery attempts made before it (looking at the oldest `limit` only),
    /// and incidents resolved before it. Returns how many; fewer than `limit` means none is left. Firing alerts and
    /// open incidents are never forgotten.
    func pruneHistory(before cutoff: Timestamp, limit: Int) async throws -> Int

    /// Releases the store (closes files, releases the data directory lock).
    func close() async throws
}

/// What a store holds at start.
public struct PersistedState: Sendable {
    /// Every device, in the order it was first stored.
    public var devices: [DeviceRecord]
    /// Containers whose `fleetDegraded` alert is firing, and when it started.
    public var fleetAlerts: [String: Timestamp]

    /// Creates a state.
    public init(devices: [DeviceRecord] = [], fleetAlerts: [String: Timestamp] = [:]) {
        self.devices = devices
        self.fleetAlerts = fleetAlerts
    }
}

/// One group of changes, committed atomically.
public struct StoreChanges: Sendable {
    /// New or changed devices (full records; last one per key wins).
    public var devices: [DeviceRecord] = []
    /// Event ids to remember for dedupe, with the time they were recorded.
    public var eventIds: [(key: DeviceKey, eventId: String)] = []
    /// Alerts that fired (inserted) or resolved (updated by id).
    public var alerts: [AlertRecord] = []
    /// Fleet alerts that started (`Timestamp`) or ended (`nil`), by container.
    public var fleetAlerts: [(containerId: String, startsAt: Timestamp?)] = []
    /// Webhook messages for the alert transitions, written in the same transaction.
    public var outbox: [OutboxMessage] = []
    /// When each written device's alert timers next need it (absent: never). Stores that keep the timers
    /// themselves (`SharedSyncStore`) persist it; the others rebuild timers from the records at start.
    public var deadlines: [DeviceKey: Timestamp] = [:]
    /// Devices taken out of the store, after everything else in these changes (`DeviceRemoval`).
    public var removals: [DeviceRemoval] = []
    /// When the changes were made (service clock), stored with the event ids.
    public var recordedAt: Timestamp

    /// Empty changes made at `recordedAt`.
    public init(recordedAt: Timestamp) {
        self.recordedAt = recordedAt
    }

    /// The claimed ids that were not recorded before, each (device, id) once, in claim order: the ids a group
    /// records, for stores that write them after planning.
    public static func newIds(_ claims: [EventIdClaim], seen: [Set<String>]) -> [(key: DeviceKey, eventId: String)] {
        var listed: [DeviceKey: Set<String>] = [:]
        var ids: [(key: DeviceKey, eventId: String)] = []
        for (claim, seen) in zip(claims, seen) {
            for id in claim.eventIds where !seen.contains(id) && listed[claim.key, default: []].insert(id).inserted {
                ids.append((claim.key, id))
            }
        }
        return ids
    }

    /// Whether there is nothing to write.
    public var isEmpty: Bool {
        devices.isEmpty && eventIds.isEmpty && alerts.isEmpty && fleetAlerts.isEmpty && outbox.isEmpty && removals.isEmpty
    }
}

/// A device that leaves the store. Applied after the rest of its changes, so that a group that resolves a device's
/// alerts and then forgets it writes both.
///
/// - `forgotten` (retention): the device's record, its place in the lists and its event-id bookkeeping go; its
///   alerts stay in the history, resolved.
/// - `erased` (a request to erase it): the same, and every alert row of the device, every webhook message about
///   it that is still queued, and its event ids. A later post from the device starts a new record.
public struct DeviceRemoval: Sendable, Hashable {
    /// Why the device leaves.
    public enum Reason: String, Sendable, Hashable {
        /// Not seen for `SYNCHEALTH_FORGET_AFTER`.
        case forgotten
        /// Erased on request (`DELETE /v1/devices/{deviceId}`).
        case erased
    }

    /// The device.
    public var key: DeviceKey
    /// Why it leaves.
    public var reason: Reason

    /// Creates a removal.
    public init(key: DeviceKey, reason: Reason) {
        self.key = key
        self.reason = reason
    }

    /// The webhook ordering keys of the device's alert lines: its queued messages are these.
    public var orderingKeys: [OutboxLine] {
        AlertKind.deviceKinds.map { .alert(AlertLine.device(key, $0)) }
    }
}

/// Why an alert resolved, when it was not because its condition ended.
public enum ResolveReason: String, Sendable, Hashable, CaseIterable {
    /// Its device was not seen for `SYNCHEALTH_FORGET_AFTER` and was forgotten.
    case forgotten
}

extension AlertRecord {
    /// The device of a per-device alert.
    public var deviceKey: DeviceKey? {
        appId.flatMap { app in deviceId.map { DeviceKey(appId: app, deviceId: $0) } }
    }
}

/// Firing or resolved.
public enum AlertState: String, Sendable, Codable, CaseIterable {
    case firing
    case resolved
}

/// One alert: one incident on one device, or on one container for fleet rules.
public struct AlertRecord: Sendable, Hashable {
    /// Deterministic id (`AlertIdentity`).
    public var id: String
    /// The rule.
    public var kind: AlertKind
    /// Firing or resolved.
    public var state: AlertState
    /// The device, for per-device alerts.
    public var deviceId: String?
    /// The app, for per-device alerts.
    public var appId: String?
    /// The container, if known.
    public var containerId: String?
    /// When it fired.
    public var startsAt: Timestamp
    /// When it resolved.
    public var endsAt: Timestamp?
    /// One line for humans.
    public var summary: String
    /// More detail for humans.
    public var detail: String
    /// Why it resolved, when not because its condition ended.
    public var reason: ResolveReason?
    /// The release, for a `releaseRegression` alert. Such alerts are written by `IncidentStore.saveReleaseAlerts`
    /// only, never in a group, so the journal's entry format does not carry it.
    public var appVersion: String?

    /// Creates an alert.
    public init(
        id: String,
        kind: AlertKind,
        state: AlertState,
        deviceId: String?,
        appId: String?,
        containerId: String?,
        startsAt: Timestamp,
        endsAt: Timestamp?,
        summary: String,
        detail: String,
        reason: ResolveReason? = nil,
        appVersion: String? = nil
    ) {
        self.reason = reason
        self.appVersion = appVersion
        self.id = id
        self.kind = kind
        self.state = state
        self.deviceId = deviceId
        self.appId = appId
        self.containerId = containerId
        self.startsAt = startsAt
        self.endsAt = endsAt
        self.summary = summary
        self.detail = detail
    }
}

/// A filter and page position for listing alerts.
public struct AlertQuery: Sendable, Hashable {
    /// Only alerts in this state.
    public var state: AlertState?
    /// Only alerts of this kind.
    public var kind: AlertKind?
    /// Only alerts of this app.
    public var appId: String?
    /// Only alerts of this device.
    public var deviceId: String?
    /// Page size.
    public var limit: Int = 100
    /// Opaque position from a previous page's `nextCursor`.
    public var cursor: Int64?

    /// Creates a query.
    public init(
        state: AlertState? = nil,
        kind: AlertKind? = nil,
        appId: String? = nil,
        deviceId: String? = nil,
        limit: Int = 100,
        cursor: Int64? = nil
    ) {
        self.state = state
        self.kind = kind
        self.appId = appId
        self.deviceId = deviceId
        self.limit = limit
        self.cursor = cursor
    }
}

/// A page of alerts.
public struct AlertPage: Sendable, Equatable {
    /// The alerts, newest first.
    public var alerts: [AlertRecord]
    /// Where the next page starts, or `nil` at the end.
    public var nextCursor: Int64?

    /// Creates a page.
    public init(alerts: [AlertRecord], nextCursor: Int64?) {
        self.alerts = alerts
        self.nextCursor = nextCursor
    }
}

/// Why a store could not start or write. Each case has a message meant for the operator.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Another process holds the data directory.
    case locked(path: String)
    /// The database file is not a valid database, or fails its integrity check.
    case corrupt(path: String, reason: String)
    /// The database was written by a newer version of synchealth.
    case newerSchema(path: String)
    /// The data directory cannot be created or opened.
    case unavailable(path: String, reason: String)
    /// A stored record could not be decoded.
    case undecodableRecord(String)

    public var description: String {
        switch self {
        case .locked(let path): "the data directory \(path) is in use by another running synchealth server"
        case .corrupt(let path, let reason): "the database \(path) is corrupt (\(reason)); restore it from a backup or move it away"
        case .newerSchema(let path): "the database \(path) was written by a newer version of synchealth; upgrade synchealth"
        case .unavailable(let path, let reason): "the data directory \(path) cannot be used: \(reason)"
        case .undecodableRecord(let what): "a stored record cannot be decoded: \(what)"
        }
    }
}

/// Alert transitions rebuilt from alert rows.
public enum AlertTransitions {
    /// The transitions of `alerts` (the newest alerts and the newest resolved ones, which may overlap), oldest
    /// first: a fire at its start and a resolve at its end; ties in time keep the alerts' order, fires first. At
    /// most `limit`, the newest.
    public static func recent(_ alerts: [AlertRecord], limit: Int) -> [AlertRecord] {
        var seen = Set<String>()
        var transitions: [(at: Timestamp, order: Int, alert: AlertRecord)] = []
        for (order, alert) in alerts.enumerated() where seen.insert(alert.id).inserted {
            var fire = alert
            fire.state = .firing
            fire.endsAt = nil
            fire.reason = nil
            transitions.append((alert.startsAt, 2 * order, fire))
            if alert.state == .resolved { transitions.append((alert.endsAt ?? alert.startsAt, 2 * order + 1, alert)) }
        }
        transitions.sort { ($0.at, $0.order) < ($1.at, $1.order) }
        return transitions.suffix(max(0, limit)).map(\.alert)
    }
}
