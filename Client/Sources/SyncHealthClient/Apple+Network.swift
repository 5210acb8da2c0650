// Network availability, handed to `networkChanged`, which is tested on every platform. Type-checked on Linux
// against declaration stubs (`Client/AppleStubs`, `Client/scripts/check-apple-glue`).
#if canImport(Network) && !os(watchOS)
import Foundation
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
