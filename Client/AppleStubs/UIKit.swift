// Declaration stubs of the UIKit API that SyncHealthClient calls (see CloudKit.swift beside this file).
@_exported import Foundation

@MainActor
open class UIResponder: NSObject {}

@available(watchOS, unavailable)
@MainActor
open class UIApplication: UIResponder {
    @available(iOSApplicationExtension, unavailable)
    open class var shared: UIApplication { fatalError("stub") }
    nonisolated public static let didEnterBackgroundNotification = NSNotification.Name("UIApplicationDidEnterBackgroundNotification")
}
