// Declaration stubs of the Foundation API that only Apple's Foundation declares, with Apple's availability
// (developer.apple.com: both exist on iOS, iPadOS, Mac Catalyst, tvOS, visionOS and watchOS, not on macOS).
// `check-apple-glue` compiles this file into the module it type-checks, since Foundation itself cannot be stubbed.
import Foundation

extension ProcessInfo {
    @available(macOS, unavailable)
    func performExpiringActivity(withReason reason: String, using block: @escaping @Sendable (Bool) -> Void) { fatalError("stub") }
}

extension NSNotification.Name {
    @available(macOS, unavailable)
    static let NSExtensionHostDidEnterBackground = NSNotification.Name("NSExtensionHostDidEnterBackgroundNotification")
}
