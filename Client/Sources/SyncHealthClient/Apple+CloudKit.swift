// CloudKit's account status and CKSyncEngine's events, handed to the package's own mappings (`accountChanged`,
// `SyncEngineMapping`), which are tested on every platform with stand-ins. Type-checked on Linux against
// declaration stubs (`Client/AppleStubs`, `Client/scripts/check-apple-glue`).
#if canImport(CloudKit)
public import CloudKit

/// `CKContainer.accountStatus`, through a container made once, when the reporter first needs it.
struct CloudKitAccountReader: AccountStatusReading {
    private let container: Unchecked<CKContainer>

    init(containerId: String) {
        container = Unchecked(value: CKContainer(identifier: containerId))
    }

    func read(_ completion: @escaping @Sendable (AccountStatus) -> Void) {
        container.value.accountStatus { status, _ in
            completion(AccountStatus(cloudKitRawValue: status.rawValue))
        }
    }
}

extension PlatformHooks {
    static let systemAccountReader: (@Sendable (String) -> any AccountStatusReading)? = { CloudKitAccountReader(containerId: $0) }
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
        // An engine runs, so this process has the iCloud entitlement: the account can be read.
        syncWorked()
    }

    /// Reads the account status again on every `CKAccountChanged` (CloudKitSyncMonitor reads it only then), once
    /// the reader exists. Observing the notification makes no container.
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
    static let systemAccountReader: (@Sendable (String) -> any AccountStatusReading)? = nil
}
#endif
