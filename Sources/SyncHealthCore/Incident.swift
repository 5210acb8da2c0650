/// What makes device alerts one incident: the same app, container, kind and, for `syncError`, the same error
/// signature (the domain and code of the device's error).
///
/// Incidents come in two populations: those of every device, and those of attested devices only (`attestedOnly`),
/// which the subscriptions that ask for `attestedOnly` hear of. An attested device's alert counts in both.
public struct IncidentKey: Hashable, Sendable, Comparable {
    /// The app.
    public var appId: String
    /// The container, if the devices report one.
    public var containerId: String?
    /// A per-device alert kind.
    public var kind: AlertKind
    /// The error's domain and code, for `syncError`; `nil` for the other kinds.
    public var signature: ErrorSignature?
    /// Counts attested devices only.
    public var attestedOnly: Bool

    /// Creates a key; the signature is kept for `syncError` only.
    public init(appId: String, containerId: String?, kind: AlertKind, signature: ErrorSignature?, attestedOnly: Bool = false) {
        self.appId = appId
        self.containerId = containerId
        self.kind = kind
        self.signature = kind == .syncError ? signature : nil
        self.attestedOnly = attestedOnly
    }

    /// The incident a device's alert of `kind` belongs to. The device's last error is sticky, and so is whether it
    /// is attested, so its alert stays in one incident from its fire to its resolve.
    public init(device: DeviceRecord, kind: AlertKind, attestedOnly: Bool = false) {
        self.init(
            appId: device.key.appId,
            containerId: device.info.containerId,
            kind: kind,
            signature: device.monitor.lastSyncError.map(ErrorSignature.init),
            attestedOnly: attestedOnly
        )
    }

    /// The stable form ids and ordering keys are digested from (an attested-only key's has one more part, so
    /// those of every device keep the form they had before there were two populations).
    public var identity: String {
        var parts = ["i", appId, containerId ?? "", kind.rawValue, signature?.domain ?? "", signature.map { String($0.code) } ?? ""]
        if attestedOnly { parts.append("attested") }
        return AlertSubject.encode(parts)
    }

    public static func < (a: IncidentKey, b: IncidentKey) -> Bool { a.identity < b.identity }
}

/// The firing device alerts of one incident key, as counted now.
public struct IncidentGroup: Hashable, Sendable {
    /// Devices with a firing alert of the key.
    public var devices: Int = 0
    /// Those devices by app version (`""`: not reported).
    public var byVersion: [String: Int] = [:]
    /// The first devices to fire, at most `IncidentBook.sampleSize`, earliest first.
    public var samples: [String] { firsts.map(\.deviceId) }
    private var firsts: [(startsAt: Timestamp, deviceId: String)] = []
    /// When the earliest of the alerts fired.
    public var since: Timestamp?

    /// An empty group.
    public init() {}

    /// Counts one device's alert that fired at `startsAt`.
    public mutating func add(deviceId: String, appVersion: String?, startsAt: Timestamp) {
        devices += 1
        byVersion[appVersion ?? "", default: 0] += 1
        since = min(since ?? startsAt, startsAt)
        let at = firsts.firstIndex { (startsAt, deviceId) < ($0.startsAt, $0.deviceId) } ?? firsts.endIndex
        guard at < IncidentBook.sampleSize else { return }
        firsts.insert((startsAt, deviceId), at: at)
        if firsts.count > IncidentBook.sampleSize { firsts.removeLast() }
    }

    public static func == (a: IncidentGroup, b: IncidentGroup) -> Bool {
        a.devices == b.devices && a.byVersion == b.byVersion && a.samples == b.samples && a.since == b.since
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(devices)
        hasher.combine(samples)
    }
}

/// Whether an incident is open (an alert of its key fires) or resolved.
public enum IncidentState: String, Sendable, CaseIterable {
    case open
    case resolved
}

/// One incident as stored: open while any of its devices' alerts fires.
public struct IncidentRecord: Hashable, Sendable {
    /// `in_` + a digest of the key and the opening time: the same on every replica.
    public var id: String
    /// What its alerts share.
    public var key: IncidentKey
    /// Open while an alert of its key fires.
    public var state: IncidentState
    /// When its first alert fired.
    public var openedAt: Timestamp
    /// When its last alert resolved.
    public var resolvedAt: Timestamp?
    /// Devices with a firing alert now.
    public var devices: Int
    /// The most devices it had at once.
    public var peakDevices: Int
    /// Devices by app version now.
    public var byVersion: [String: Int]
    /// Some of its devices.
    public var samples: [String]
    /// When the last message about it was written; `nil` before the first.
    public var notifiedAt: Timestamp?
    /// Its devices as the last message told them.
    public var notifiedDevices: Int
    /// Messages written so far: numbers each message, so that a message has the same id whichever replica writes it.
    public var messages: Int
    /// When it was found flapping (its key had opened more than the flap threshold within the flap window): from
    /// then on it sends no updates and stays open until its devices have been quiet for a whole window.
    public var flappingSince: Timestamp?
    /// While flapping: since when none of its devices' alerts fires (it resolves a window later).
    public var quietSince: Timestamp?
    /// Its device count over time, oldest first: a point each step the count changed, thinned to at most
    /// `IncidentBook.historyLimit` points (the dashboard's sparkline).
    public var history: [IncidentPoint]
    /// One more each write: a write based on another revision is refused.
    public var revision: Int

    /// Creates a record.
    public init(
        id: String,
        key: IncidentKey,
        state: IncidentState = .open,
        openedAt: Timestamp,
        resolvedAt: Timestamp? = nil,
        devices: Int = 0,
        peakDevices: Int = 0,
        byVersion: [String: Int] = [:],
        samples: [String] = [],
        notifiedAt: Timestamp? = nil,
        notifiedDevices: Int = 0,
        messages: Int = 0,
        flappingSince: Timestamp? = nil,
        quietSince: Timestamp? = nil,
        history: [IncidentPoint] = [],
        revision: Int = 0
    ) {
        self.id = id
        self.key = key
        self.state = state
        self.openedAt = openedAt
        self.resolvedAt = resolvedAt
        self.devices = devices
        self.peakDevices = peakDevices
        self.byVersion = byVersion
        self.samples = samples
        self.notifiedAt = notifiedAt
        self.notifiedDevices = notifiedDevices
        self.messages = messages
        self.flappingSince = flappingSince
        self.quietSince = quietSince
        self.history = history
        self.revision = revision
    }

    /// The id of the incident of `key` that opened at `openedAt`.
    public static func id(key: IncidentKey, openedAt: Timestamp) -> String {
        "in_" + AlertIdentity.digest([key.identity, String(openedAt.microseconds)])
    }
}

/// An incident's device count at one time.
public struct IncidentPoint: Hashable, Sendable {
    /// When the count was taken.
    public var at: Timestamp
    /// Devices with a firing alert then.
    public var devices: Int

    /// Creates a point.
    public init(at: Timestamp, devices: Int) {
        self.at = at
        self.devices = devices
    }
}
