// Declaration stubs of the DeviceCheck API that SyncHealthClient calls (see CloudKit.swift beside this file), as
// Apple documents them: the completion handlers are @Sendable, DCAppAttestService is not declared Sendable.
@_exported import Foundation

open class DCAppAttestService: NSObject {
    open class var shared: DCAppAttestService { fatalError("stub") }
    open var isSupported: Bool { fatalError("stub") }
    open func generateKey(completionHandler: @escaping @Sendable (String?, (any Error)?) -> Void) { fatalError("stub") }
    open func attestKey(_ keyId: String, clientDataHash: Data, completionHandler: @escaping @Sendable (Data?, (any Error)?) -> Void) {
        fatalError("stub")
    }
    open func generateAssertion(_ keyId: String, clientDataHash: Data, completionHandler: @escaping @Sendable (Data?, (any Error)?) -> Void) {
        fatalError("stub")
    }
}

public struct DCError: Error, Hashable, Sendable {
    public enum Code: Int, Sendable {
        case unknownSystemFailure = 0
        case featureUnsupported = 1
        case invalidInput = 2
        case invalidKey = 3
        case serverUnavailable = 4
    }
    public init(_ code: Code, userInfo: [String: Any] = [:]) { fatalError("stub") }
    public var code: Code { fatalError("stub") }
    public static func == (lhs: DCError, rhs: DCError) -> Bool { fatalError("stub") }
    public func hash(into hasher: inout Hasher) { fatalError("stub") }
}
