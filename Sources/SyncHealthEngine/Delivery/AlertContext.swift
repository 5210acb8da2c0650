public import SyncHealthCore
import SyncHealthStore

/// What a message tells about an alert beyond the alert record: its device's error and state. Routing by error
/// class and the Alertmanager labels read it.
public struct AlertContext: Sendable, Equatable {
    /// The device's most recent error. It is sticky, so the alert keeps the same class (and the same Alertmanager
    /// labels) from its fire to its resolve.
    public var error: SyncErrorReport?
    /// The device's summary now.
    public var summary: SyncStateSummary?
    /// Local changes waiting for export.
    public var pendingChanges: Int?
    /// The device's platform, OS and app version, as last reported.
    public var info: DeviceInfo?
    /// Whether the device is attested (`DeviceRecord.attested`); `false` for fleet and release alerts, which every
    /// device's reports move.
    public var attested = false

    /// The class of `error`.
    public var errorClass: ErrorClass? { error?.errorClass }

    /// No device: a container's fleet alert.
    public static let fleet = AlertContext()

    /// A release's regression alert: the release stands in for the device's app version, so that silences and
    /// labels that name an app version apply to it.
    public static func release(_ key: ReleaseKey) -> AlertContext {
        var context = AlertContext()
        context.info = DeviceInfo(appVersion: key.version)
        return context
    }

    /// The context of a device's alert.
    public init(device record: DeviceRecord) {
        error = record.monitor.lastSyncError
        summary = record.monitor.summary
        pendingChanges = record.monitor.pendingChanges
        info = record.info
        attested = record.attested
    }

    init() {}
}
