/// One of the three sync phases that CloudKit reports.
public enum Phase: String, CaseIterable, Sendable, Codable {
    case setup
    case `import`
    case export
}

/// Where an activity is in its life.
public enum ActivityState: String, CaseIterable, Sendable, Codable {
    case started
    case succeeded
    case failed
}

/// The device's iCloud account status (`CKAccountStatus`).
public enum AccountStatus: String, CaseIterable, Sendable, Codable {
    case available
    case noAccount
    case restricted
    case couldNotDetermine
    case temporarilyUnavailable
}

/// A device, identified by the pair (`appId`, `deviceId`).
public struct DeviceKey: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The app's identifier, e.g. a bundle id.
    public var appId: String
    /// The device's identifier within the app.
    public var deviceId: String

    /// Creates a key.
    public init(appId: String, deviceId: String) {
        self.appId = appId
        self.deviceId = deviceId
    }

    public static func < (lhs: DeviceKey, rhs: DeviceKey) -> Bool {
        (lhs.appId, lhs.deviceId) < (rhs.appId, rhs.deviceId)
    }

    public var description: String { "\(appId)/\(deviceId)" }
}

/// The optional descriptive fields a device sends with each batch.
public struct DeviceInfo: Hashable, Sendable {
    /// The CloudKit container, e.g. `iCloud.com.example.notes`.
    public var containerId: String?
    /// `iOS`, `macOS`, …
    public var platform: String?
    /// The OS version.
    public var osVersion: String?
    /// The app's version.
    public var appVersion: String?

    /// Creates device info.
    public init(containerId: String? = nil, platform: String? = nil, osVersion: String? = nil, appVersion: String? = nil) {
        self.containerId = containerId
        self.platform = platform
        self.osVersion = osVersion
        self.appVersion = appVersion
    }

    /// Takes every field `newer` reports; keeps the old value where `newer` is silent.
    public mutating func merge(_ newer: DeviceInfo) {
        if let v = newer.containerId { containerId = v }
        if let v = newer.platform { platform = v }
        if let v = newer.osVersion { osVersion = v }
        if let v = newer.appVersion { appVersion = v }
    }
}

/// One sync event a device posted.
public struct DeviceEvent: Hashable, Sendable {
    /// Unique per device; a repeated id is a duplicate.
    public var eventId: String
    /// When the event happened, on the device's clock.
    public var occurredAt: Timestamp
    /// What happened.
    public var body: Body

    /// Creates an event.
    public init(eventId: String, occurredAt: Timestamp, body: Body) {
        self.eventId = eventId
        self.occurredAt = occurredAt
        self.body = body
    }

    /// The kinds of events and their fields.
    public enum Body: Hashable, Sendable {
        /// Setup, import or export activity.
        case activity(Activity)
        /// Network availability changed.
        case network(available: Bool)
        /// The iCloud account status changed.
        case account(AccountStatus)
        /// Local changes waiting to be exported.
        case pending(count: Int, oldestPendingAt: Timestamp?)
        /// A periodic sign of life, optionally with the summary the device computed itself.
        case heartbeat(clientSummary: SyncStateSummary?)
    }

    /// An activity event of one phase.
    public struct Activity: Hashable, Sendable {
        /// The phase.
        public var phase: Phase
        /// Started, succeeded or failed.
        public var state: ActivityState
        /// When the activity started, if reported.
        public var startedAt: Timestamp?
        /// When it ended, if reported.
        public var endedAt: Timestamp?
        /// The activity's id, if reported.
        public var activityId: String?
        /// The error, for failures.
        public var error: SyncErrorReport?

        /// Creates an activity.
        public init(
            phase: Phase,
            state: ActivityState,
            startedAt: Timestamp? = nil,
            endedAt: Timestamp? = nil,
            activityId: String? = nil,
            error: SyncErrorReport? = nil
        ) {
            self.phase = phase
            self.state = state
            self.startedAt = startedAt
            self.endedAt = endedAt
            self.activityId = activityId
            self.error = error
        }
    }
}
