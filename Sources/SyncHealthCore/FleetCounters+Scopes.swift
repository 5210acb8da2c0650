extension FleetCounts {
    /// Adds (`sign` 1) or removes (`sign` -1) another scope's counts, field by field.
    public mutating func add(_ other: FleetCounts, sign: Int = 1) {
        devices += sign * other.devices
        active += sign * other.active
        silent += sign * other.silent
        broken += sign * other.broken
        activeBroken += sign * other.activeBroken
        notSyncing += sign * other.notSyncing
        for i in bySummaryCounts.indices { bySummaryCounts[i] += sign * other.bySummaryCounts[i] }
        for i in byErrorClassCounts.indices { byErrorClassCounts[i] += sign * other.byErrorClassCounts[i] }
    }
}

extension FleetCounters {
    /// Every scope with at least one device, and its counts.
    public var scopes: [FleetScope: FleetCounts] {
        counts.filter { $0.value.devices > 0 }
    }
}

/// The scopes a view or an exporter shows when there may be more than it can afford: the largest first.
public enum FleetScopeSelection {
    /// At most `limit` scopes, the whole fleet always first, then the others by devices (most first), ties by
    /// app and container so that the choice is stable.
    public static func largest(_ all: [FleetScope: FleetCounts], limit: Int) -> [(scope: FleetScope, counts: FleetCounts)] {
        var rest = all.filter { $0.key != .all }.map { (scope: $0.key, counts: $0.value) }
        rest.sort { a, b in
            if a.counts.devices != b.counts.devices { return a.counts.devices > b.counts.devices }
            return (a.scope.appId ?? "", a.scope.containerId ?? "") < (b.scope.appId ?? "", b.scope.containerId ?? "")
        }
        let head = all[.all].map { [(scope: FleetScope.all, counts: $0)] } ?? []
        return head + rest.prefix(max(0, limit - head.count))
    }

    /// The fleet cut into disjoint parts, one per app and container (`containerId` `nil` for an app's devices that
    /// report none), whose counts add up to the whole fleet: what per-app series export without counting a
    /// device twice.
    public static func leaves(_ all: [FleetScope: FleetCounts]) -> [(appId: String, containerId: String?, counts: FleetCounts)] {
        var byApp: [String: FleetCounts] = [:]
        var leaves: [(appId: String, containerId: String?, counts: FleetCounts)] = []
        for (scope, counts) in all {
            guard let appId = scope.appId else { continue }
            if let containerId = scope.containerId {
                leaves.append((appId, containerId, counts))
                byApp[appId, default: FleetCounts()].add(counts, sign: -1)
            } else {
                byApp[appId, default: FleetCounts()].add(counts)
            }
        }
        for (appId, remainder) in byApp where remainder.devices > 0 { leaves.append((appId, nil, remainder)) }
        return leaves.sorted { ($0.appId, $0.containerId ?? "") < ($1.appId, $1.containerId ?? "") }
    }
}
