// Declaration stubs of the UIKit API that SyncHealthClient calls (see CloudKit.swift beside this file), and of
// the Foundation API that only Apple's Foundation declares, which only files importing UIKit call.
@_exported import Foundation

@MainActor
open class UIResponder: NSObject {}

@MainActor
open class UIApplication: UIResponder {
    @available(iOSApplicationExtension, unavailable)
    open class var shared: UIApplication { fatalError("stub") }
    nonisolated public static let didEnterBackgroundNotification = NSNotification.Name("UIApplicationDidEnterBackgroundNotification")
}

extension ProcessInfo {
    @available(macOS, unavailable)
    public func performExpiringActivity(withReason reason: String, using block: @escaping @Sendable (Bool) -> Void) { fatalError("stub") }
}

extension NSNotification.Name {
    public static let NSExtensionHostDidEnterBackground = NSNotification.Name("NSExtensionHostDidEnterBackgroundNotification")
}
