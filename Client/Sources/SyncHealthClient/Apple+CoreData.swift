// Core Data's events, handed to the package's own mapping (`SyncEvent(persistentCloudKitEvent:)`), which is
// tested on every platform with stand-ins. Type-checked on Linux against declaration stubs
// (`Client/AppleStubs`, `Client/scripts/check-apple-glue`).
#if canImport(CoreData)
public import CoreData

extension NSPersistentCloudKitContainer.Event: PersistentCloudKitEventDescribing {
    /// The event's phase.
    public var phase: Phase? {
        switch type {
        case .setup: .setup
        case .import: .import
        case .export: .export
        @unknown default: nil
        }
    }
}

extension PlatformHooks {
    static let systemObserveAllPersistentCloudKitEvents: (@Sendable (SyncHealthReporter) -> Void)? = { reporter in
        reporter.observePersistentCloudKitEvents()
    }
}

extension SyncHealthReporter {
    /// Records the setup, import and export events of `container` (or of every container when `nil`, which is
    /// what SwiftData needs: its `ModelContainer` does not expose the `NSPersistentCloudKitContainer`). Calling
    /// it again for the same container, or for one while every container is observed, records nothing twice.
    public func observePersistentCloudKitEvents(of container: NSPersistentCloudKitContainer? = nil) {
        observePersistentCloudKitNotifications(named: NSPersistentCloudKitContainer.eventChangedNotification, of: container) { note in
            note.userInfo?[NSPersistentCloudKitContainer.eventNotificationUserInfoKey] as? NSPersistentCloudKitContainer.Event
        }
    }
}
#else
extension PlatformHooks {
    static let systemObserveAllPersistentCloudKitEvents: (@Sendable (SyncHealthReporter) -> Void)? = nil
}
#endif
