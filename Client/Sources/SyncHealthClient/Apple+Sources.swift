// The Apple-only glue: thin conformances and observers that hand Apple's types to the package's own mappings
// (`SyncEvent(persistentCloudKitEvent:)`, `SyncEngineMapping`, `networkChanged`, `accountChanged`), which are
// tested on every platform with stand-ins.
import Foundation

/// Wraps a value that is only ever used to be released (an observer token, a monitor to cancel).
private struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
}

extension SyncHealthReporter {
    /// Keeps a function that removes a platform observer at shutdown.
    func addStop(_ stop: @escaping @Sendable () -> Void) {
        shared.withLock { $0.sources.stops.append(stop) }
    }

    /// Starts the sources that need no setup from the app: network and account (when configured) and the
    /// upload on going to the background.
    func startPlatformSources() {
        #if canImport(Network)
        if configuration.observesNetworkAndAccount { observeNetwork() }
        #endif
        #if canImport(CloudKit)
        if configuration.observesNetworkAndAccount, let containerId = configuration.containerId { observeAccount(containerId: containerId) }
        #endif
        #if canImport(UIKit) && !os(watchOS)
        observeBackground()
        #endif
    }
}

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

extension SyncHealthReporter {
    /// Records the setup, import and export events of `container` (or of every container when `nil`, which is
    /// what SwiftData needs: its `ModelContainer` does not expose the `NSPersistentCloudKitContainer`).
    public func observePersistentCloudKitEvents(of container: NSPersistentCloudKitContainer? = nil) {
        let token = NotificationCenter.default.addObserver(
            forName: NSPersistentCloudKitContainer.eventChangedNotification,
            object: container,
            queue: nil
        ) { [weak self] note in
            guard let event = note.userInfo?[NSPersistentCloudKitContainer.eventNotificationUserInfoKey] as? NSPersistentCloudKitContainer.Event
            else { return }
            self?.record(persistentCloudKitEvent: event)
        }
        let box = Unchecked(value: token)
        addStop { NotificationCenter.default.removeObserver(box.value) }
    }
}
#endif

#if canImport(CloudKit)
public import CloudKit

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

    /// Reads the account status now and on every `CKAccountChanged` (CloudKitSyncMonitor reads it only on change).
    func observeAccount(containerId: String) {
        let container = Unchecked(value: CKContainer(identifier: containerId))
        let read: @Sendable () -> Void = { [weak self] in
            container.value.accountStatus { status, _ in
                self?.accountChanged(AccountStatus(cloudKitRawValue: status.rawValue))
            }
        }
        read()
        let token = NotificationCenter.default.addObserver(forName: .CKAccountChanged, object: nil, queue: nil) { _ in read() }
        let box = Unchecked(value: token)
        addStop { NotificationCenter.default.removeObserver(box.value) }
    }
}
#endif

#if canImport(Network)
import Network

extension SyncHealthReporter {
    /// Records network availability as `NWPathMonitor` sees it, on changes.
    func observeNetwork() {
        let monitor = NWPathMonitor()
        monitor.pathUpdateHandler = { [weak self] path in
            self?.networkChanged(available: path.status == .satisfied)
        }
        monitor.start(queue: DispatchQueue(label: "SyncHealthClient.network", qos: .utility))
        let box = Unchecked(value: monitor)
        addStop { box.value.cancel() }
    }
}
#endif

#if canImport(UIKit) && !os(watchOS)
import UIKit

extension SyncHealthReporter {
    /// Sends the queue when the app goes to the background, inside a background task so that suspension does
    /// not cut the upload.
    func observeBackground() {
        let token = NotificationCenter.default.addObserver(
            forName: UIApplication.didEnterBackgroundNotification,
            object: nil,
            queue: .main
        ) { [weak self] _ in
            MainActor.assumeIsolated { self?.flushInBackgroundTask() }
        }
        let box = Unchecked(value: token)
        addStop { NotificationCenter.default.removeObserver(box.value) }
    }

    @MainActor
    @available(iOSApplicationExtension, unavailable)
    @available(tvOSApplicationExtension, unavailable)
    @available(visionOSApplicationExtension, unavailable)
    func flushInBackgroundTask() {
        let application = UIApplication.shared
        let task = Locked(UIBackgroundTaskIdentifier.invalid)
        let end: @Sendable () -> Void = {
            let id = task.withLock { id -> UIBackgroundTaskIdentifier in
                defer { id = .invalid }
                return id
            }
            if id != .invalid { Task { @MainActor in UIApplication.shared.endBackgroundTask(id) } }
        }
        task.withLock { $0 = application.beginBackgroundTask(withName: "SyncHealth upload") { end() } }
        Task.detached(priority: .utility) { [weak self] in
            try? await self?.flush()
            end()
        }
    }
}
#endif
