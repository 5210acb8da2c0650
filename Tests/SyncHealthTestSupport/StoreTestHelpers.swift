public import SyncHealthCore
public import SyncHealthStore

// What the store suites of every store module share.

/// `s` seconds after the epoch.
public func seconds(_ s: Int64) -> Timestamp { Timestamp(microseconds: s * 1_000_000) }

extension SyncStore {
    /// Records `ids` of one device at `at` through a group commit that writes nothing else; returns which were
    /// recorded before.
    public func record(_ ids: [String], of key: DeviceKey, at: Timestamp) async throws -> Set<String> {
        let seen = try await commit(claiming: [(key: key, eventIds: ids)], at: at) { seen in (changes: StoreChanges(recordedAt: at), result: seen) }
        return seen.first ?? []
    }

    /// Forgets every event id recorded before `cutoff`, in batches as the engine does. Returns how many.
    public func pruneEventIds(recordedBefore cutoff: Timestamp) async throws -> Int {
        var total = 0
        while true {
            let removed = try await pruneEventIds(recordedBefore: cutoff, limit: 2)
            total += removed
            if removed < 2 { return total }
        }
    }
}

/// `bytes` as lowercase hex, for golden fixtures.
public func hex(_ bytes: [UInt8]) -> String {
    bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
}

/// The bytes a hex string spells.
public func bytes(_ hex: String) -> [UInt8] {
    var out: [UInt8] = []
    var i = hex.startIndex
    while i < hex.endIndex, let j = hex.index(i, offsetBy: 2, limitedBy: hex.endIndex) {
        out.append(UInt8(hex[i..<j], radix: 16) ?? 0)
        i = j
    }
    return out
}
