/// How release health cuts an app's devices: by the app version they run, or by their OS version.
public enum ReleaseDimension: String, CaseIterable, Sendable {
    case appVersion
    case osVersion
}

/// An error's identity across devices: its domain and code.
public struct ErrorSignature: Hashable, Sendable, Comparable {
    /// The error domain.
    public var domain: String
    /// The code within the domain.
    public var code: Int

    /// Creates a signature.
    public init(domain: String, code: Int) {
        self.domain = domain
        self.code = code
    }

    /// The signature of a reported error.
    public init(_ error: SyncErrorReport) {
        self.init(domain: error.domain, code: error.code)
    }

    public static func < (a: ErrorSignature, b: ErrorSignature) -> Bool { (a.domain, a.code) < (b.domain, b.code) }
}

/// The counters of one release: its devices as `FleetCounts` count them, the devices by error signature, and
/// when its devices were first and last seen.
public struct ReleaseCounts: Hashable, Sendable {
    /// The devices on this release.
    public var counts = FleetCounts()
    /// Devices by the signature of their worst visible sync error.
    public var errors: [ErrorSignature: Int] = [:]
    /// The earliest first contact of the devices counted on this release (not raised when a device leaves it).
    public var firstSeenAt: Timestamp?
    /// The latest contact of the devices counted on this release.
    public var lastSeenAt: Timestamp?

    /// Empty counts.
    public init() {}

    /// `activeBroken / active`, the share `fleetDegraded` and the regression test use; `nil` with no active device.
    public var brokenShare: Double? {
        counts.active > 0 ? Double(counts.activeBroken) / Double(counts.active) : nil
    }

    /// The `limit` signatures with the most devices, most first (ties by signature).
    public func topErrors(limit: Int) -> [(signature: ErrorSignature, devices: Int)] {
        errors.filter { $0.value > 0 }.map { (signature: $0.key, devices: $0.value) }
            .sorted { $0.devices != $1.devices ? $0.devices > $1.devices : $0.signature < $1.signature }
            .prefix(limit).map { $0 }
    }

    /// Counts `arrived` in (a device that moved here), and notes the times of a device counted here.
    mutating func count(_ arrived: FleetContribution?, firstSeenAt: Timestamp, lastSeenAt: Timestamp) {
        if let arrived { add(arrived, 1) }
        self.firstSeenAt = min(self.firstSeenAt ?? firstSeenAt, firstSeenAt)
        self.lastSeenAt = max(self.lastSeenAt ?? lastSeenAt, lastSeenAt)
    }

    mutating func add(_ c: FleetContribution, _ sign: Int) {
        counts.add(c, sign)
        if let error = c.error {
            let signature = ErrorSignature(error)
            let n = errors[signature, default: 0] + sign
            errors[signature] = n == 0 ? nil : n
        }
    }
}

/// Per-release counters of every app, kept incrementally beside `FleetCounters` so that release health reads in
/// O(releases of one app), whatever the fleet's size.
public struct ReleaseCounters: Sendable {
    /// One app cut along one dimension.
    struct Cut: Hashable {
        var appId: String
        var dimension: ReleaseDimension
    }

    /// By cut, then by release (`""` for devices that reported none).
    var cuts: [Cut: [String: ReleaseCounts]] = [:]

    /// Empty counters.
    public init() {}

    /// Moves one device from its old contribution (`nil` for a new device) to its new one, and notes when it was
    /// first and last seen on the new one.
    public mutating func replace(_ old: FleetContribution?, with new: FleetContribution?, firstSeenAt: Timestamp, lastSeenAt: Timestamp) {
        // Compared once: most groups find a device where it was, and only its times move.
        let moved = old != new
        if moved, let old {
            for dimension in ReleaseDimension.allCases {
                cuts[Cut(appId: old.appId, dimension: dimension), default: [:]][old.release(dimension), default: ReleaseCounts()].add(old, -1)
            }
        }
        guard let new else { return }
        for dimension in ReleaseDimension.allCases {
            cuts[Cut(appId: new.appId, dimension: dimension), default: [:]][new.release(dimension), default: ReleaseCounts()].count(
                moved ? new : nil,
                firstSeenAt: firstSeenAt,
                lastSeenAt: lastSeenAt
            )
        }
    }

    /// An app's releases along `dimension` that still have devices, by release (`""`: none reported).
    public func releases(appId: String, by dimension: ReleaseDimension) -> [String: ReleaseCounts] {
        (cuts[Cut(appId: appId, dimension: dimension)] ?? [:]).filter { $0.value.counts.devices > 0 }
    }

    /// Every app with a device.
    public var appIds: [String] {
        Set(cuts.filter { $0.key.dimension == .appVersion && $0.value.values.contains { $0.counts.devices > 0 } }.map(\.key.appId)).sorted()
    }

    /// Counts every device from scratch: the reference the incremental counters must equal.
    public static func recount(
        _ devices: some Sequence<(contribution: FleetContribution, firstSeenAt: Timestamp, lastSeenAt: Timestamp)>
    ) -> ReleaseCounters {
        var counters = ReleaseCounters()
        for d in devices { counters.replace(nil, with: d.contribution, firstSeenAt: d.firstSeenAt, lastSeenAt: d.lastSeenAt) }
        return counters
    }
}

extension FleetContribution {
    /// The release this contribution counts in along `dimension` (`""` when the device reported none).
    func release(_ dimension: ReleaseDimension) -> String {
        switch dimension {
        case .appVersion: appVersion ?? ""
        case .osVersion: osVersion ?? ""
        }
    }
}

extension MonitorState {
    /// The worst of the visible sync errors (setup, import, export; the earliest phase among equals): the error
    /// `syncErrorClass` is the class of.
    public var worstSyncError: SyncErrorReport? {
        var worst: SyncErrorReport?
        for error in [setupError, importError, exportError] {
            guard let error else { continue }
            if worst.map({ error.errorClass > $0.errorClass }) ?? true { worst = error }
        }
        return worst
    }
}
