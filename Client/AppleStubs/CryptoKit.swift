// Declaration stubs of the CryptoKit API that SyncHealthClient calls (see CloudKit.swift beside this file).
@_exported import Foundation

public struct SHA256Digest: Sequence, Sendable {
    public func makeIterator() -> Array<UInt8>.Iterator { fatalError("stub") }
}

public struct SHA256: Sendable {
    public static func hash<D: DataProtocol>(data: D) -> SHA256Digest { fatalError("stub") }
}
