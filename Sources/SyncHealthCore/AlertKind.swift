/// The alert rules of monitor-semantics.md, part 2.
public enum AlertKind: String, CaseIterable, Sendable, Codable {
    case syncError
    case notSyncing
    case syncStalled
    case exportAtRisk
    case fleetDegraded
    case releaseRegression

    /// The per-device kinds (all but `fleetDegraded` and `releaseRegression`).
    public static let deviceKinds: [AlertKind] = [.syncError, .notSyncing, .syncStalled, .exportAtRisk]
}

/// The delays and thresholds of the alert rules. Defaults are those of the spec.
public struct AlertConfiguration: Hashable, Sendable {
    /// Delay of `notSyncing`.
    public var notSyncingAfter: Duration = .seconds(60)
    /// Delay of `syncError` for classes other than `developer` and `dataLoss` (which fire at once).
    public var errorAfter: Duration = .seconds(120)
    /// Delay of `syncStalled`.
    public var stalledAfter: Duration = .seconds(15 * 60)
    /// Delay of `exportAtRisk`, from the oldest pending change.
    public var exportAtRiskAfter: Duration = .seconds(30 * 60)
    /// Time without events after which a device counts as silent.
    public var silentAfter: Duration = .seconds(24 * 3600)
    /// Share of a container's active devices that must be broken for `fleetDegraded` (strictly more than).
    public var fleetBrokenShare: Double = 0.10
    /// Fewest active devices a container needs before `fleetDegraded` is judged.
    public var fleetMinimumActive: Int = 20
    /// Fewest active devices a release needs before it is judged a regression (`ReleaseRegression`).
    public var releaseMinimumDevices: Int = 50

    /// The defaults.
    public init() {}
}

/// An alert that starts or ends.
public struct AlertTransition: Hashable, Sendable {
    /// Whether the alert fires or resolves.
    public enum Change: String, Sendable, Hashable {
        case fire
        case resolve
    }

    /// The rule.
    public var kind: AlertKind
    /// Fire or resolve.
    public var change: Change
    /// When the alert started (for a resolve too: identifies the incident).
    public var startsAt: Timestamp
    /// When it ended, for a resolve.
    public var endsAt: Timestamp?

    /// Creates a transition.
    public init(kind: AlertKind, change: Change, startsAt: Timestamp, endsAt: Timestamp? = nil) {
        self.kind = kind
        self.change = change
        self.startsAt = startsAt
        self.endsAt = endsAt
    }
}

/// One rule's timer on one device: since when its condition holds, and whether it fires.
public struct RuleTimer: Hashable, Sendable {
    /// When the service first observed the condition (service clock); `nil` while it does not hold.
    @PackedTimestamp public var conditionSince: Timestamp?
    /// When the firing alert started; `nil` while not firing.
    @PackedTimestamp public var firingSince: Timestamp?

    /// An idle timer.
    public init(conditionSince: Timestamp? = nil, firingSince: Timestamp? = nil) {
        self.conditionSince = conditionSince
        self.firingSince = firingSince
    }

    /// Steps the timer at `now`.
    ///
    /// - Parameters:
    ///   - holds: whether the condition holds now.
    ///   - since: when the condition started, if the rule knows better than "now" (export at risk).
    ///   - delay: how long the condition must hold before the alert fires.
    /// - Returns: the transition, if any, and the time at which this timer next needs a look.
    mutating func step(kind: AlertKind, holds: Bool, since: Timestamp? = nil, delay: Duration, now: Timestamp) -> (AlertTransition?, Timestamp?) {
        guard holds else {
            conditionSince = nil
            guard let started = firingSince else { return (nil, nil) }
            firingSince = nil
            return (AlertTransition(kind: kind, change: .resolve, startsAt: started, endsAt: now), nil)
        }
        if let since {
            conditionSince = min(since, now)
        } else if conditionSince == nil {
            conditionSince = now
        }
        if firingSince != nil { return (nil, nil) }
        let due = (conditionSince ?? now) + delay
        if now >= due {
            firingSince = now
            return (AlertTransition(kind: kind, change: .fire, startsAt: now), nil)
        }
        return (nil, due)
    }
}
