// expect: unavailable on macOS
// `ProcessInfo.performExpiringActivity` and `NSExtensionHostDidEnterBackground` do not exist on macOS: code that
// calls them outside `#if !os(macOS)` does not compile for a Mac, which the check of each platform must see.
import Foundation

func flushWithExpiringActivity() {
    ProcessInfo.processInfo.performExpiringActivity(withReason: "SyncHealth upload") { _ in }
}
