/// Everything the service keeps for one device: its identity, its monitor state, and the timers of its alert rules.
///
/// A value type: its mutating functions return what happened, and the caller does the I/O.
public struct DeviceRecord: Hashable, Sendable {
    /// The device's identity.
    public var key: DeviceKey
    /// The descriptive fields last reported.
    public var info: DeviceInfo
    /// When the service first received an event from the device (service clock).
    public var firstSeenAt: Timestamp
    /// When the service last received an event from the device (service clock).
    public var lastSeenAt: Timestamp
    /// The CloudKitSyncMonitor state.
    public var monitor = MonitorState()
    /// The rule timers, one per per-device alert kind.
    public var syncError = RuleTimer()
    /// See `syncError`.
    public var notSyncing = RuleTimer()
    /// See `syncError`.
    public var syncStalled = RuleTimer()
    /// See `syncError`.
    public var exportAtRisk = RuleTimer()
    /// Set when the device sent a timestamp beyond the skew tolerance; its `occurredAt` was clamped.
    public var clockSkewDetected = false
    /// `startedAt` of the oldest activity in progress at the last evaluation, which identifies a stall.
    @PackedTimestamp public var stalledActivityStart: Timestamp? = nil
    /// Whether the device's uploads are proven genuine (App Attest): the last batch applied carried a valid
    /// assertion of the device's own key. It changes only while none of the device's alerts fires, so that an alert's
    /// resolve goes where its fire went (`attestedOnly` subscriptions, attested incidents).
    public var attested = false

    /// A device first seen at `now`.
    public init(key: DeviceKey, info: DeviceInfo = DeviceInfo(), firstSeenAt: Timestamp) {
        self.key = key
        self.info = info
        self.firstSeenAt = firstSeenAt
        self.lastSeenAt = firstSeenAt
    }

    /// The timer of a per-device rule.
    public subscript(timer kind: AlertKind) -> RuleTimer {
        get {
            switch kind {
            case .syncError: syncError
            case .notSyncing: notSyncing
            case .syncStalled: syncStalled
            case .exportAtRisk, .fleetDegraded, .releaseRegression: exportAtRisk
            }
        }
        set {
            switch kind {
            case .syncError: syncError = newValue
            case .notSyncing: notSyncing = newValue
            case .syncStalled: syncStalled = newValue
            case .exportAtRisk: exportAtRisk = newValue
            case .fleetDegraded, .releaseRegression: break
            }
        }
    }

    /// The per-device alerts firing now, with their start times.
    public var firingAlerts: [(kind: AlertKind, startsAt: Timestamp)] {
        AlertKind.deviceKinds.compactMap { kind in self[timer: kind].firingSince.map { (kind, $0) } }
    }

    /// Whether the device counts as silent at `now`.
    public func isSilent(now: Timestamp, configuration: AlertConfiguration) -> Bool {
        now >= lastSeenAt + configuration.silentAfter
    }
}
