// expect: traps for an identifier outside the entitlement
// `CKContainer(identifier:)` traps when the identifier is not in the app's entitlement: the reporter must read the
// account of the container the app hands over, never make one from `containerId`.
#if canImport(CloudKit)
import CloudKit

extension SyncHealthReporter {
    func containerFromTheConfiguration() -> CKContainer? {
        configuration.containerId.map { CKContainer(identifier: $0) }
    }
}
#endif
