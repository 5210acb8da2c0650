import HeapModule

/// Decides which alert transitions are worth telling ops about: a flapping alert is told once, then held until
/// it has been quiet for a window. (Many devices breaking at once are grouped into incidents, for the subscriptions
/// that want them, by `IncidentBook`; a subscription that groups by device hears of every device.)
///
/// A value type: `decide` and `settle` return what to deliver, and the caller writes the messages.
///
/// Every call costs in proportion to the lines it touches, not to all the lines kept (one per device alert that
/// changed in the last window, so tens of thousands in a large fleet): lines wait for `settle` in a queue
/// ordered by time, and a group's changes can be taken back (`beginChanges`, `discardChanges`) without copying.
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
        /// When the line's entry in the settle queue comes due, if it has one (then at most its settle time).
        var settleAt: Timestamp?
    }

    /// A line's turn in `settle`. An entry whose time is not its line's `settleAt` is stale and skipped.
    struct Entry: Comparable, Sendable {
        var at: Timestamp
        var key: AlertLine

        static func < (a: Entry, b: Entry) -> Bool { (a.at, a.key) < (b.at, b.key) }
    }

    /// The values a group's calls replaced, so that they can be put back.
    struct Journal: Sendable {
        var lines: [AlertLine: Line?] = [:]
    }

    /// Thresholds.
    public var configuration: Configuration
    /// Lines with recent activity: one per device in a fleet-wide outage, so in shards, which
    /// grow without rehashing every line at once under the engine's lock (see `ShardedDictionary`).
    public private(set) var lines = ShardedDictionary<AlertLine, Line>()
    /// Lines by when `settle` should look at them: each line with a `settleAt` has an entry at that time.
    private var queue = Heap<Entry>()
    /// Set between `beginChanges` and `keepChanges` or `discardChanges`.
    private var journal: Journal?

    /// An empty policy.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Decides about one transition on line `key`.
    public mutating func decide(key: AlertLine, transition: AlertTransition, now: Timestamp) -> Decision {
        remember(line: key)
        var line = lines[key] ?? Line()
        let windowStart = now - configuration.flapWindow
        line.fires.removeAll { $0 < windowStart }
        if transition.change == .fire { line.fires.append(now) }
        line.last = transition
        line.lastAt = now
        // An entry already queued comes due earlier than this line now does: `settle` puts it back for later.
        if line.settleAt == nil {
            line.settleAt = now + configuration.flapWindow
            queue.insert(Entry(at: now + configuration.flapWindow, key: key))
        }
        defer { lines[key] = line }
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
    public mutating func settle(now: Timestamp) -> [(key: AlertLine, transition: AlertTransition)] {
        var deliver: [(AlertLine, AlertTransition)] = []
        while let top = queue.min, top.at <= now {
            _ = queue.popMin()
            guard var line = lines[top.key], line.settleAt == top.at else { continue }
            remember(line: top.key)
            if let lastAt = line.lastAt, now < lastAt + configuration.flapWindow {
                // Active since the entry was queued: its turn comes a window after its last transition.
                line.settleAt = lastAt + configuration.flapWindow
                queue.insert(Entry(at: lastAt + configuration.flapWindow, key: top.key))
                lines[top.key] = line
                continue
            }
            if line.flappingSince != nil, let last = line.last, last.change != line.lastDelivered {
                deliver.append((top.key, last))
            }
            line.flappingSince = nil
            line.fires.removeAll()
            line.settleAt = nil
            if line.last?.change == .resolve || line.last == nil {
                lines[top.key] = nil
            } else {
                line.lastDelivered = line.last?.change
                lines[top.key] = line
            }
        }
        return deliver.sorted { $0.0 < $1.0 }
    }

    /// When `settle` next has something to look at (it may find the line active since, and look again later).
    public var nextSettleTime: Timestamp? {
        queue.min?.at
    }

    /// Starts recording what the calls change, so that `discardChanges` can put it back: a group decides on the
    /// policy in place, before its commit, and takes its decisions back if the commit fails.
    public mutating func beginChanges() {
        journal = Journal()
    }

    /// Whether anything changed since `beginChanges` (a line touched).
    public var hasChanges: Bool {
        guard let journal else { return false }
        return !journal.lines.isEmpty
    }

    /// Keeps the changes since `beginChanges`.
    public mutating func keepChanges() {
        journal = nil
    }

    /// Puts back what changed since `beginChanges` (nothing if it was not called).
    public mutating func discardChanges() {
        guard let journal else { return }
        self.journal = nil
        for (key, line) in journal.lines {
            lines[key] = line
            // Its queue entry may have been taken meanwhile; a second one at the same time is skipped as stale.
            if let at = line?.settleAt { queue.insert(Entry(at: at, key: key)) }
        }
    }

    private mutating func remember(line key: AlertLine) {
        guard journal != nil, journal?.lines.index(forKey: key) == nil else { return }
        journal?.lines.updateValue(lines[key], forKey: key)
    }

    public static func == (a: NotificationPolicy, b: NotificationPolicy) -> Bool {
        a.configuration == b.configuration && a.lines == b.lines
    }
}
