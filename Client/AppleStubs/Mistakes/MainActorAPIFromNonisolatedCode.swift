// expect: main actor-isolated class property 'shared' can not be referenced from a nonisolated context
// `UIApplication` is main-actor isolated: its members cannot be reached from the reporter's nonisolated code.
#if canImport(UIKit)
import UIKit

extension SyncHealthReporter {
    func applicationFromAnyThread() -> UIApplication {
        UIApplication.shared
    }
}
#endif
