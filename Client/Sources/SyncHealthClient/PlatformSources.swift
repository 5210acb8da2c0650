import Foundation

/// Wraps a value that is only ever used to be released (an observer token, a monitor to cancel).
struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
}

extension SyncHealthReporter {
    /// Keeps a function that removes a platform observer at shutdown.
    func addStop(_ stop: @escaping @Sendable () -> Void) {
        shared.withLock { $0.sources.stops.append(stop) }
    }

    /// Starts the sources that need no setup from the app: network availability, the account of the container
    /// the app gave (at once, and on account changes), and the upload on going to the background. None of them
    /// makes a `CKContainer`.
    func startPlatformSources() {
        if configuration.observesPersistentCloudKitEvents, let observe = configuration.platform.observeAllPersistentCloudKitEvents {
            observe(self)
        }
        startAccountReading()
        if configuration.observesNetworkAndAccount, !configuration.platform.canObserveNetwork {
            // The monitor shows errors only while the network is known to be up, so an unknown network would hide
            // every error: it is taken as available.
            networkChanged(available: true)
        }
        #if canImport(Network) && !os(watchOS)
        if configuration.observesNetworkAndAccount, configuration.platform.canObserveNetwork { observeNetwork() }
        #endif
        #if canImport(CloudKit)
        if configuration.observesNetworkAndAccount, configuration.accountContainerObject != nil { observeAccountChanges() }
        #endif
        #if canImport(UIKit) || os(macOS)
        observeBackground()
        #endif
    }

    /// Records the events that `NSPersistentCloudKitContainer` posts as `name`, for `container` (every container
    /// when `nil`), once however often it is called. `event` reads the event out of a notification.
    func observePersistentCloudKitNotifications(
        named name: Notification.Name,
        of container: AnyObject?,
        event: @escaping @Sendable (Notification) -> (any PersistentCloudKitEventDescribing)?
    ) {
        observeContainer(container) {
            let token = NotificationCenter.default.addObserver(forName: name, object: container, queue: nil) { [weak self] note in
                guard let event = event(note) else { return }
                self?.record(persistentCloudKitEvent: event)
            }
            let box = Unchecked(value: token)
            return { NotificationCenter.default.removeObserver(box.value) }
        }
    }
}
