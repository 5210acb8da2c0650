/// What an alert is about: one device, one container (for the fleet rule), or one release of an app (for the
/// regression rule).
public enum AlertSubject: Hashable, Sendable {
    case device(DeviceKey)
    case container(String)
    case release(appId: String, version: String)
}

/// The line along which one subject's alert messages are delivered in order, and on which flapping is counted:
/// one device's alerts of one kind, one container's fleet alert, or one release's regression alert.
public struct AlertLine: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The device or container.
    public var subject: AlertSubject
    /// The rule (`fleetDegraded` for a container's line).
    public var kind: AlertKind

    /// The line of one device's alerts of `kind`.
    public static func device(_ key: DeviceKey, _ kind: AlertKind) -> AlertLine {
        AlertLine(subject: .device(key), kind: kind)
    }

    /// The line of one container's fleet alert.
    public static func container(_ containerId: String) -> AlertLine {
        AlertLine(subject: .container(containerId), kind: .fleetDegraded)
    }

    /// The line of one release's regression alert.
    public static func release(appId: String, version: String) -> AlertLine {
        AlertLine(subject: .release(appId: appId, version: version), kind: .releaseRegression)
    }

    /// The device of a device line.
    public var deviceKey: DeviceKey? {
        if case .device(let key) = subject { return key }
        return nil
    }

    /// The stored form: the outbox's ordering key. Rows written by earlier versions keep theirs, so it never changes.
    public var storageKey: String {
        switch subject {
        case .device(let key): AlertSubject.encode(["d", key.appId, key.deviceId, kind.rawValue])
        case .container(let id): AlertSubject.encode(["c", id])
        case .release(let appId, let version): AlertSubject.encode(["r", appId, version])
        }
    }

    public var description: String { storageKey }

    public static func < (a: AlertLine, b: AlertLine) -> Bool {
        a.sortKey < b.sortKey
    }

    private var sortKey: (Int, String, String, String) {
        switch subject {
        case .device(let key): (0, key.appId, key.deviceId, kind.rawValue)
        case .container(let id): (1, id, "", "")
        case .release(let appId, let version): (2, appId, version, "")
        }
    }
}

extension AlertSubject {
    /// The stable form that alert ids are digested from: the same incident must get the same id on every replica,
    /// after every restart and across versions, so this never changes.
    public var identity: String {
        switch self {
        case .device(let key): Self.encode(["d", key.appId, key.deviceId])
        case .container(let id): Self.encode(["c", id])
        case .release(let appId, let version): Self.encode(["r", appId, version])
        }
    }

    /// Joins parts with U+0001, which no identifier may contain.
    static func encode(_ parts: [String]) -> String {
        parts.joined(separator: "\u{1}")
    }
}
