/// The `fleetDegraded` rule: one incident per container while the share of its active devices that are broken
/// exceeds the threshold.
public struct FleetAlerts: Sendable, Equatable {
    /// Containers with a firing `fleetDegraded` alert, and when each started.
    public private(set) var firing: [String: Timestamp] = [:]

    /// No alert firing.
    public init(firing: [String: Timestamp] = [:]) {
        self.firing = firing
    }

    /// Whether a container's counts are degraded.
    public static func isDegraded(_ counts: FleetCounts, configuration: AlertConfiguration) -> Bool {
        guard counts.active >= max(1, configuration.fleetMinimumActive) else { return false }
        return Double(counts.activeBroken) > configuration.fleetBrokenShare * Double(counts.active)
    }

    /// Evaluates one container at `now`, returning the transition if its state changed.
    public mutating func evaluate(containerId: String, counts: FleetCounts, now: Timestamp, configuration: AlertConfiguration) -> AlertTransition? {
        let degraded = Self.isDegraded(counts, configuration: configuration)
        switch (degraded, firing[containerId]) {
        case (true, nil):
            firing[containerId] = now
            return AlertTransition(kind: .fleetDegraded, change: .fire, startsAt: now)
        case (false, let started?):
            firing[containerId] = nil
            return AlertTransition(kind: .fleetDegraded, change: .resolve, startsAt: started, endsAt: now)
        default:
            return nil
        }
    }
}
