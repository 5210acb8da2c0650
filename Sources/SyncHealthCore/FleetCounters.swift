/// A slice of the fleet: everything, one app, one container, or one app's container.
public struct FleetScope: Hashable, Sendable {
    /// The app, or `nil` for any.
    public var appId: String?
    /// The container, or `nil` for any.
    public var containerId: String?

    /// Creates a scope.
    public init(appId: String? = nil, containerId: String? = nil) {
        self.appId = appId
        self.containerId = containerId
    }

    /// The whole fleet.
    public static let all = FleetScope()

    /// The scopes a device with this app and container counts in.
    public static func scopes(appId: String, containerId: String?) -> [FleetScope] {
        var scopes = [FleetScope.all, FleetScope(appId: appId)]
        if let containerId {
            scopes.append(FleetScope(containerId: containerId))
            scopes.append(FleetScope(appId: appId, containerId: containerId))
        }
        return scopes
    }
}

/// What one device adds to the counters of its scopes.
public struct FleetContribution: Hashable, Sendable {
    /// The app the device belongs to.
    public var appId: String
    /// The container, if reported.
    public var containerId: String?
    /// The device's summary.
    public var summary: SyncStateSummary
    /// `isNotSyncing`.
    public var notSyncing: Bool
    /// The worst class among the device's visible sync errors.
    public var errorClass: ErrorClass?
    /// Whether the device is silent.
    public var silent: Bool
    /// The app version, as last reported: the release it counts in.
    public var appVersion: String?
    /// The OS version, as last reported.
    public var osVersion: String?
    /// The worst of the device's visible sync errors (the one `errorClass` comes from): its signature is counted
    /// per release.
    public var error: SyncErrorReport?

    /// Creates a contribution.
    public init(
        appId: String,
        containerId: String?,
        summary: SyncStateSummary,
        notSyncing: Bool,
        errorClass: ErrorClass?,
        silent: Bool,
        appVersion: String? = nil,
        osVersion: String? = nil,
        error: SyncErrorReport? = nil
    ) {
        self.appId = appId
        self.containerId = containerId
        self.summary = summary
        self.notSyncing = notSyncing
        self.errorClass = errorClass
        self.silent = silent
        self.appVersion = appVersion
        self.osVersion = osVersion
        self.error = error
    }
}

extension DeviceRecord {
    /// What this device adds to the fleet counters at `now`.
    public func fleetContribution(now: Timestamp, configuration: AlertConfiguration) -> FleetContribution {
        FleetContribution(
            appId: key.appId,
            containerId: info.containerId,
            summary: monitor.summary,
            notSyncing: monitor.isNotSyncing,
            errorClass: monitor.syncErrorClass,
            silent: isSilent(now: now, configuration: configuration),
            appVersion: info.appVersion,
            osVersion: info.osVersion,
            error: monitor.worstSyncError
        )
    }
}

/// The counters of one scope. Every count covers all devices of the scope, silent or not, except `active`
/// and `activeBroken`.
public struct FleetCounts: Hashable, Sendable {
    /// Devices ever seen.
    public var devices = 0
    /// Devices heard from within the silence window.
    public var active = 0
    /// Devices not heard from within the silence window.
    public var silent = 0
    /// Devices whose summary is broken.
    public var broken = 0
    /// Active devices whose summary is broken (the base of `fleetDegraded`).
    public var activeBroken = 0
    /// Devices with `isNotSyncing`.
    public var notSyncing = 0
    /// Devices by summary, indexed like `SyncStateSummary.allCases`.
    public var bySummaryCounts = [Int](repeating: 0, count: SyncStateSummary.allCases.count)
    /// Devices with a visible error, by the error's class, indexed like `ErrorClass.allCases`.
    public var byErrorClassCounts = [Int](repeating: 0, count: ErrorClass.allCases.count)

    /// Empty counts.
    public init() {}

    /// Devices by summary value, every value present.
    public var bySummary: [(SyncStateSummary, Int)] {
        SyncStateSummary.allCases.enumerated().map { ($0.element, bySummaryCounts[$0.offset]) }
    }

    /// Devices by error class, every class present.
    public var byErrorClass: [(ErrorClass, Int)] {
        ErrorClass.allCases.enumerated().map { ($0.element, byErrorClassCounts[$0.offset]) }
    }

    /// Counts a device's part in (`sign` 1) or out (-1).
    public mutating func add(_ c: FleetContribution, _ sign: Int) {
        devices += sign
        if c.silent { silent += sign } else { active += sign }
        if c.summary.isBroken {
            broken += sign
            if !c.silent { activeBroken += sign }
        }
        if c.notSyncing { notSyncing += sign }
        if let index = SyncStateSummary.allCases.firstIndex(of: c.summary) { bySummaryCounts[index] += sign }
        if let cls = c.errorClass, let index = ErrorClass.allCases.firstIndex(of: cls) { byErrorClassCounts[index] += sign }
    }
}

/// Fleet counters kept incrementally per scope, so that reading a summary is O(1) whatever the fleet size.
public struct FleetCounters: Sendable, Equatable {
    var counts: [FleetScope: FleetCounts] = [:]

    /// Empty counters.
    public init() {}

    /// Moves one device from its old contribution (`nil` for a new device) to its new one.
    public mutating func replace(_ old: FleetContribution?, with new: FleetContribution?) {
        if old == new { return }
        if let old {
            for scope in FleetScope.scopes(appId: old.appId, containerId: old.containerId) {
                counts[scope, default: FleetCounts()].add(old, -1)
            }
        }
        if let new {
            for scope in FleetScope.scopes(appId: new.appId, containerId: new.containerId) {
                counts[scope, default: FleetCounts()].add(new, 1)
            }
        }
    }

    /// The counts of a scope (zero if no device is in it).
    public subscript(scope: FleetScope) -> FleetCounts {
        counts[scope] ?? FleetCounts()
    }

    /// Recounts from scratch; the reference the incremental counters must equal.
    public static func recount(_ contributions: some Sequence<FleetContribution>) -> FleetCounters {
        var counters = FleetCounters()
        for c in contributions { counters.replace(nil, with: c) }
        return counters
    }

    /// Whether two counters agree on every scope with devices (empty scopes are ignored).
    public static func == (lhs: FleetCounters, rhs: FleetCounters) -> Bool {
        let empty = FleetCounts()
        let keys = Set(lhs.counts.keys).union(rhs.counts.keys)
        return keys.allSatisfy { (lhs.counts[$0] ?? empty) == (rhs.counts[$0] ?? empty) }
    }
}
