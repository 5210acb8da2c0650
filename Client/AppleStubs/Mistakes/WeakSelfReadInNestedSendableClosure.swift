// expect: reference to captured var 'self' in concurrently-executing code
// The account read as it once was: `[weak self]` captured by the outer closure and read in the `@Sendable`
// completion handler of `accountStatus`. `scripts/check-apple-glue` shows that the type-check refuses it.
#if canImport(CloudKit)
import CloudKit

extension SyncHealthReporter {
    func observeAccountAsBefore(containerId: String) {
        let container = Unchecked(value: CKContainer(identifier: containerId))
        let read: @Sendable () -> Void = { [weak self] in
            container.value.accountStatus { status, _ in
                self?.accountChanged(AccountStatus(cloudKitRawValue: status.rawValue))
            }
        }
        read()
    }
}
#endif
