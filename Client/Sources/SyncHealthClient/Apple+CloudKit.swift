// CloudKit's account status and CKSyncEngine's events, handed to the package's own mappings (`accountChanged`,
// `SyncEngineMapping`), which are tested on every platform with stand-ins. Type-checked on Linux against
// declaration stubs (`Client/AppleStubs`, `Client/scripts/check-apple-glue`).
#if canImport(CloudKit)
public import CloudKit

/// `CKContainer.accountStatus` of the container the app gave.
struct CloudKitAccountReader: AccountStatusReading {
    private let container: Unchecked<CKContainer>

    init(container: CKContainer) {
        self.container = Unchecked(value: container)
    }

    func read(_ completion: @escaping @Sendable (AccountStatus) -> Void) {
        container.value.accountStatus { status, _ in
            completion(AccountStatus(cloudKitRawValue: status.rawValue))
        }
    }
}

extension PlatformHooks {
    static let systemAccountReader: (@Sendable (AnyObject) -> (any AccountStatusReading)?)? = { object in
        (object as? CKContainer).map(CloudKitAccountReader.init(container:))
    }
}

extension SyncHealthReporter.Configuration {
    /// The container whose iCloud account status the reporter reads: the one your store or engine syncs with, as
    /// your app already makes it (`CKContainer.default()`, or `CKContainer(identifier:)` with an identifier of your
    /// entitlement). The reporter never makes one from `containerId`: `CKContainer(identifier:)` traps for an
    /// identifier outside the app's `com.apple.developer.icloud-container-identifiers` (a typo, another container,
    /// an extension without it). Without one, the account is read from the engines' events: CKSyncEngine's account
    /// changes, and Core Data's "no account" error (`NSCocoaErrorDomain` 134400).
    public var accountContainer: CKContainer? {
        get { accountContainerObject?.value as? CKContainer }
        set { accountContainerObject = newValue.map { Unchecked(value: $0) } }
    }
}

extension SyncHealthReporter {
    /// Records what one `CKSyncEngine` event means; call it from your delegate's `handleEvent(_:syncEngine:)`.
    public func handle(_ event: CKSyncEngine.Event, syncEngine: CKSyncEngine) {
        let mapped: SyncEngineEvent
        switch event {
        case .accountChange(let change):
            switch change.changeType {
            case .signIn: mapped = .accountChange(.signIn)
            case .signOut: mapped = .accountChange(.signOut)
            case .switchAccounts: mapped = .accountChange(.switchAccounts)
            @unknown default: mapped = .other
            }
        case .willFetchChanges: mapped = .willFetchChanges
        case .didFetchRecordZoneChanges(let fetched): mapped = .didFetchRecordZoneChanges(error: fetched.error.map { SyncErrorReport(error: $0) })
        case .didFetchChanges: mapped = .didFetchChanges
        case .willSendChanges: mapped = .willSendChanges
        case .sentRecordZoneChanges(let sent):
            let codes = sent.failedRecordSaves.map { $0.error.code.rawValue } + sent.failedRecordDeletes.values.map { $0.code.rawValue }
            mapped = .sentRecordZoneChanges(failedCodes: codes)
        case .didSendChanges: mapped = .didSendChanges
        default: mapped = .other
        }
        handle(mapped, pendingChanges: syncEngine.state.pendingRecordZoneChanges.count)
    }

    /// Reads the account status again on every `CKAccountChanged` (CloudKitSyncMonitor reads it only then).
    /// Observing the notification makes no container.
    func observeAccountChanges() {
        let token = NotificationCenter.default.addObserver(forName: .CKAccountChanged, object: nil, queue: nil) { [weak self] _ in
            self?.accountMayHaveChanged()
        }
        let box = Unchecked(value: token)
        addStop { NotificationCenter.default.removeObserver(box.value) }
    }
}
#else
extension PlatformHooks {
    static let systemAccountReader: (@Sendable (AnyObject) -> (any AccountStatusReading)?)? = nil
}
#endif
