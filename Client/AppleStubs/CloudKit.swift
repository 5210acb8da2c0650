// Declaration stubs of the CloudKit API that SyncHealthClient calls, so that its Apple glue is type-checked on
// Linux (`scripts/check-apple-glue`). Each signature copies the SDK's declaration (iOS 17 / macOS 14 and later)
// as Apple documents it: isolation, `@Sendable`, optionality and `throws`. Bodies are never run.
@_exported import Foundation

public enum CKAccountStatus: Int, @unchecked Sendable {
    case couldNotDetermine = 0
    case available = 1
    case restricted = 2
    case noAccount = 3
    case temporarilyUnavailable = 4
}

extension NSNotification.Name {
    public static let CKAccountChanged = NSNotification.Name("CKAccountChanged")
}

open class CKContainer: NSObject {
    // Apple's initializer traps for an identifier outside the app's iCloud entitlement. The package never makes a
    // container from a string (the app hands its own over: `accountContainer`), so the stub refuses the call: any
    // use in the sources fails the check (AppleStubs/Mistakes/ContainerFromAString.swift proves it).
    @available(*, unavailable, message: "traps for an identifier outside the entitlement: take the app's container")
    public init(identifier containerIdentifier: String) { fatalError("stub") }
    public class func `default`() -> CKContainer { fatalError("stub") }
    open func accountStatus(completionHandler: @escaping @Sendable (CKAccountStatus, (any Error)?) -> Void) { fatalError("stub") }
}

public struct CKError: Error, Hashable, Sendable {
    public enum Code: Int, Sendable, Hashable {
        case internalError = 1
        case partialFailure = 2
        case networkUnavailable = 3
        case networkFailure = 4
        case badContainer = 5
        case unknownItem = 11
        case serverRecordChanged = 14
        case batchRequestFailed = 22
        case quotaExceeded = 25
        case zoneNotFound = 26
    }
    public var code: Code { fatalError("stub") }
}

open class CKRecord: NSObject, @unchecked Sendable {
    open class ID: NSObject, @unchecked Sendable {}
}

open class CKRecordZone: NSObject, @unchecked Sendable {
    open class ID: NSObject, @unchecked Sendable {}
}

@available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, *)
public final class CKSyncEngine: Sendable {
    public var state: CKSyncEngine.State { fatalError("stub") }

    public final class State: Sendable {
        public var pendingRecordZoneChanges: [CKSyncEngine.PendingRecordZoneChange] { fatalError("stub") }
    }

    public enum PendingRecordZoneChange: Hashable, Sendable {
        case saveRecord(CKRecord.ID)
        case deleteRecord(CKRecord.ID)
    }

    public enum Event: Sendable {
        case stateUpdate(StateUpdate)
        case accountChange(AccountChange)
        case fetchedDatabaseChanges(FetchedDatabaseChanges)
        case fetchedRecordZoneChanges(FetchedRecordZoneChanges)
        case sentDatabaseChanges(SentDatabaseChanges)
        case sentRecordZoneChanges(SentRecordZoneChanges)
        case willFetchChanges(WillFetchChanges)
        case willFetchRecordZoneChanges(WillFetchRecordZoneChanges)
        case didFetchRecordZoneChanges(DidFetchRecordZoneChanges)
        case didFetchChanges(DidFetchChanges)
        case willSendChanges(WillSendChanges)
        case didSendChanges(DidSendChanges)

        public struct StateUpdate: Sendable {}
        public struct FetchedDatabaseChanges: Sendable {}
        public struct FetchedRecordZoneChanges: Sendable {}
        public struct SentDatabaseChanges: Sendable {}
        public struct WillFetchChanges: Sendable {}
        public struct WillFetchRecordZoneChanges: Sendable {}
        public struct DidFetchChanges: Sendable {}
        public struct WillSendChanges: Sendable {}
        public struct DidSendChanges: Sendable {}

        public struct AccountChange: Sendable {
            public enum ChangeType: Sendable {
                case signIn(currentUser: CKRecord.ID)
                case signOut(previousUser: CKRecord.ID)
                case switchAccounts(previousUser: CKRecord.ID, currentUser: CKRecord.ID)
            }
            public var changeType: ChangeType { fatalError("stub") }
        }

        public struct DidFetchRecordZoneChanges: Sendable {
            public var zoneID: CKRecordZone.ID { fatalError("stub") }
            public var error: CKError? { fatalError("stub") }
        }

        public struct SentRecordZoneChanges: Sendable {
            public struct FailedRecordSave: Sendable {
                public var record: CKRecord { fatalError("stub") }
                public var error: CKError { fatalError("stub") }
            }
            public var savedRecords: [CKRecord] { fatalError("stub") }
            public var failedRecordSaves: [FailedRecordSave] { fatalError("stub") }
            public var deletedRecordIDs: [CKRecord.ID] { fatalError("stub") }
            public var failedRecordDeletes: [CKRecord.ID: CKError] { fatalError("stub") }
        }
    }
}
