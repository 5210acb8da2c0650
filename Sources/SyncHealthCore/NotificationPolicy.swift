/// Decides which alert transitions are worth telling ops about: a flapping alert is told once, and while a
/// container's `fleetDegraded` fires, that container's device alerts are held back and counted.
///
/// A value type: `decide` and `settle` return what to deliver, and the caller writes the messages.
public struct NotificationPolicy: Sendable, Equatable {
    /// Thresholds.
    public struct Configuration: Sendable, Equatable {
        /// An alert that fires more than this many times within `flapWindow` is flapping.
        public var flapThreshold = 3
        /// The window for counting fires, and how long a flapping alert must stay quiet to settle.
        public var flapWindow: Duration = .seconds(3600)

        /// The defaults: more than 3 fires in an hour.
        public init() {}
    }

    /// What to do with one transition.
    public enum Decision: Sendable, Equatable {
        /// Deliver it; `flapping` marks the one message that tells ops the alert started flapping.
        case deliver(flapping: Bool)
        /// Do not deliver: the alert is flapping and ops were told.
        case suppressFlapping
        /// Do not deliver: the container's fleet alert fires; the transition is counted for its summary.
        case holdForFleet
    }

    /// A line of one device's alerts of one kind.
    public struct Line: Sendable, Equatable {
        /// Fire times within the window.
        public var fires: [Timestamp] = []
        /// Since when the line is flapping, if it is.
        public var flappingSince: Timestamp?
        /// The last transition, delivered or not.
        public var last: AlertTransition?
        /// The change ops last heard of.
        public var lastDelivered: AlertTransition.Change?
        /// When the last transition happened.
        public var lastAt: Timestamp?
    }

    /// Thresholds.
    public var configuration: Configuration
    /// Lines with recent activity, by ordering key.
    public private(set) var lines: [String: Line] = [:]
    /// Device transitions held back per container while its fleet alert fires.
    public private(set) var heldBack: [String: Int] = [:]

    /// An empty policy.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Decides about one device transition on line `key`.
    public mutating func decide(key: String, containerId: String?, transition: AlertTransition, fleetFiring: Bool, now: Timestamp) -> Decision {
        var line = lines[key] ?? Line()
        let windowStart = now - configuration.flapWindow
        line.fires.removeAll { $0 < windowStart }
        if transition.change == .fire { line.fires.append(now) }
        line.last = transition
        line.lastAt = now
        defer { lines[key] = line }
        if fleetFiring, let containerId {
            heldBack[containerId, default: 0] += 1
            return .holdForFleet
        }
        if line.flappingSince != nil { return .suppressFlapping }
        if line.fires.count > configuration.flapThreshold {
            line.flappingSince = now
            line.lastDelivered = transition.change
            return .deliver(flapping: true)
        }
        line.lastDelivered = transition.change
        return .deliver(flapping: false)
    }

    /// Ends flapping for lines quiet for a whole window, and forgets idle lines. Returns the lines whose
    /// current state differs from what ops last heard, with the transition to deliver now.
    public mutating func settle(now: Timestamp) -> [(key: String, transition: AlertTransition)] {
        var deliver: [(String, AlertTransition)] = []
        for (key, var line) in lines {
            guard let lastAt = line.lastAt, now >= lastAt + configuration.flapWindow else { continue }
            if line.flappingSince != nil, let last = line.last, last.change != line.lastDelivered {
                deliver.append((key, last))
            }
            line.flappingSince = nil
            line.fires.removeAll()
            if line.last?.change == .resolve || line.last == nil {
                lines[key] = nil
            } else {
                line.lastDelivered = line.last?.change
                lines[key] = line
            }
        }
        return deliver.sorted { $0.0 < $1.0 }
    }

    /// When `settle` next has something to do.
    public var nextSettleTime: Timestamp? {
        lines.values.compactMap { line in line.flappingSince != nil || !line.fires.isEmpty ? line.lastAt.map { $0 + configuration.flapWindow } : nil }.min()
    }

    /// The number of device transitions held back for a container, which is reset.
    public mutating func takeHeldBack(containerId: String) -> Int {
        heldBack.removeValue(forKey: containerId) ?? 0
    }
}
