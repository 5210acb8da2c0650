// Declaration stubs of the Core Data API that SyncHealthClient calls (see CloudKit.swift beside this file).
@_exported import Foundation

open class NSPersistentContainer: NSObject {}

open class NSPersistentCloudKitContainer: NSPersistentContainer {
    public static let eventChangedNotification = NSNotification.Name("NSPersistentCloudKitContainerEventChangedNotification")
    public static let eventNotificationUserInfoKey = "event"

    public enum EventType: Int, @unchecked Sendable {
        case setup = 0
        case `import` = 1
        case export = 2
    }

    open class Event: NSObject {
        open var identifier: UUID { fatalError("stub") }
        open var storeIdentifier: String { fatalError("stub") }
        open var type: NSPersistentCloudKitContainer.EventType { fatalError("stub") }
        open var startDate: Date { fatalError("stub") }
        open var endDate: Date? { fatalError("stub") }
        open var succeeded: Bool { fatalError("stub") }
        open var error: (any Error)? { fatalError("stub") }
    }
}
