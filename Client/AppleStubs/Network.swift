// Declaration stubs of the Network API that SyncHealthClient calls (see CloudKit.swift beside this file).
@_exported import Foundation

public struct NWPath: Sendable, Equatable {
    public enum Status: Sendable, Equatable, Hashable {
        case satisfied
        case unsatisfied
        case requiresConnection
    }
    public var status: NWPath.Status { fatalError("stub") }
}

public final class NWPathMonitor: @unchecked Sendable {
    public init() { fatalError("stub") }
    public final var pathUpdateHandler: (@Sendable (_ newPath: NWPath) -> Void)?
    public final func start(queue: DispatchQueue) { fatalError("stub") }
    public final func cancel() { fatalError("stub") }
}
