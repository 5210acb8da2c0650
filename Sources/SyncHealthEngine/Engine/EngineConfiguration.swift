public import SyncHealthCore

/// Tunables of the monitor engine.
public struct EngineConfiguration: Sendable {
    /// Delays and thresholds of the alert rules.
    public var alerts = AlertConfiguration()
    /// Flapping thresholds for webhook deliveries.
    public var notifications = NotificationPolicy.Configuration()
    /// Group wait and interval of incidents.
    public var incidents = IncidentBook.Configuration()
    /// How often every app's releases are judged for `releaseRegression` (`RegressionWatch`).
    public var releaseCheckInterval: Duration = .seconds(30)
    /// How device timestamps in the future are treated.
    public var skew = SkewPolicy()
    /// Where ops open the dashboard (`https://synchealth.example.com`), for links in alert messages; none if `nil`.
    public var publicURL: String?
    /// How long event ids are remembered for dedupe.
    public var dedupeRetention: Duration = .seconds(7 * 86_400)
    /// A device not seen for this long is forgotten (`DeviceRemoval.Reason.forgotten`); `nil` keeps every device.
    public var forgetAfter: Duration? = .seconds(180 * 86_400)
    /// How long resolved alerts, resolved incidents and webhook delivery attempts are kept (`SyncStore.pruneHistory`);
    /// `nil` keeps them all.
    public var alertRetention: Duration? = .seconds(90 * 86_400)
    /// Most expired event ids forgotten in one transaction. Forgetting runs hourly, a transaction of this size
    /// at a time between groups, so that a request waits for one small transaction at most, never for an hour of
    /// ids (docs/benchmarks-log.md#forgetting-expired-ids).
    public var pruneBatchSize = 500
    /// Most requests committed in one transaction.
    public var maxGroupRequests = 1024
    /// Most requests waiting for a commit before new ones are shed with 503.
    public var maxQueuedRequests = 20_000
    /// Most due timers served in one transaction.
    public var maxTimersPerGroup = 10_000
    /// With a shared store: how often an idle replica looks for timers that came due (set by any replica,
    /// or left by one that died).
    public var sharedPollInterval: Duration = .milliseconds(250)

    /// With a shared store: most devices a replica remembers between groups (`SharedCache`), about 1.5 KB each;
    /// 0 reads every group first.
    public var sharedCacheDevices = 1_000_000

    /// Most devices a device listing looks at per hold of the cache lock (each hold ~1 ms at most).
    public var listScanChunk = 8_192

    /// The defaults.
    public init() {}

    /// When a device's timers next need it: its alert rules' next deadline, or the time it is to be forgotten if
    /// that is sooner.
    func deadline(_ alerts: Timestamp?, for record: DeviceRecord) -> Timestamp? {
        guard let forgetAfter else { return alerts }
        let forgetAt = record.lastSeenAt + forgetAfter
        return min(alerts ?? forgetAt, forgetAt)
    }

    /// Whether a device not seen since its last event is to be forgotten at `now`.
    func isForgotten(_ record: DeviceRecord, now: Timestamp) -> Bool {
        forgetAfter.map { now >= record.lastSeenAt + $0 } ?? false
    }
}

/// Why the engine could not take or finish a request.
public enum EngineError: Error, Sendable, Equatable {
    /// Too many requests are waiting for a commit.
    case overloaded
    /// The store failed to commit; nothing of the request was applied.
    case storeUnavailable
    /// The engine is shutting down.
    case stopping
    /// The engine is still loading its state.
    case starting
}

/// What one accepted batch did.
public struct IngestReceipt: Sendable, Equatable {
    /// Valid events applied (including ones older than their slot).
    public var accepted: Int
    /// Events whose id the device had sent before.
    public var duplicates: Int

    /// Creates a receipt.
    public init(accepted: Int, duplicates: Int) {
        self.accepted = accepted
        self.duplicates = duplicates
    }
}
