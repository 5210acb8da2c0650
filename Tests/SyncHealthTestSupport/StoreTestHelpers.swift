public import SyncHealthCore
@_spi(Testing) public import SyncHealthStore

// What the store suites of every store module share.

/// `s` seconds after the epoch.
public func seconds(_ s: Int64) -> Timestamp { Timestamp(microseconds: s * 1_000_000) }

/// What a test store's plan throws to hand back what it was shown without writing anything.
private struct Peeked: Error {
    let seen: [Set<String>]
}

struct NotAGroupStore: Error {}

struct WriteRefused: Error {}

extension SyncStore {
    /// One group's commit, the way the engine makes it on this kind of store: a series of one where one process
    /// writes (`LocalSyncStore`), a read and a guarded write where replicas share the store (`SharedSyncStore`).
    /// `plan` is told, per claim, the ids recorded before; the claims' new ids are recorded with the changes.
    public func commit<Result: Sendable>(
        claiming claims: [EventIdClaim],
        at recordedAt: Timestamp,
        plan: @escaping @Sendable (_ seen: [Set<String>]) throws -> (changes: StoreChanges, result: Result)
    ) async throws -> Result {
        if let local = self as? any LocalSyncStore { return try await local.commit(claiming: claims, at: recordedAt, plan: plan) }
        guard let shared = self as? any SharedSyncStore else { throw NotAGroupStore() }
        return try await shared.group { group in
            let seen = try await group.read(GroupRead(keys: [], claims: claims, now: recordedAt, dueLimit: 0, containers: [])).seen
            var (changes, result) = try plan(seen)
            changes.eventIds = StoreChanges.newIds(claims, seen: seen)
            changes.recordedAt = recordedAt
            // Guarded on the devices and fleet alerts as they are now, as a group that read them would be.
            let keys = Array(Set(changes.devices.map(\.key) + changes.removals.map(\.key)))
            let read = try await group.read(GroupRead(keys: keys, claims: [], now: recordedAt, dueLimit: 0, containers: []))
            let versions = Dictionary(read.devices.map { ($0.record.key, $0.version) }, uniquingKeysWith: { first, _ in first })
            let write = GroupWrite(changes: changes, versions: versions, fleetAlertsRead: read.fleetAlerts, counters: FleetCounters())
            guard try await group.write(write) else { throw WriteRefused() }
            return result
        }
    }

    /// Commits `changes` as one group that claims `changes.eventIds`.
    public func commit(_ changes: StoreChanges) async throws {
        var claims: [EventIdClaim] = []
        var slot: [DeviceKey: Int] = [:]
        for (key, id) in changes.eventIds {
            if let i = slot[key] {
                claims[i].eventIds.append(id)
            } else {
                slot[key] = claims.count
                claims.append((key, [id]))
            }
        }
        try await commit(claiming: claims, at: changes.recordedAt) { _ in (changes, ()) }
    }

    /// Per claim, the ids recorded before, read as a group reads them; writes nothing.
    public func seenEventIds(_ claims: [EventIdClaim]) async throws -> [Set<String>] {
        if let shared = self as? any SharedSyncStore {
            return try await shared.group { group in
                try await group.read(GroupRead(keys: [], claims: claims, now: Timestamp(microseconds: 0), dueLimit: 0, containers: [])).seen
            }
        }
        do {
            // A group whose plan refuses writes nothing; the refusal carries what it was shown.
            try await commit(claiming: claims, at: Timestamp(microseconds: 0)) { seen -> (changes: StoreChanges, result: Void) in
                throw Peeked(seen: seen)
            }
            return []
        } catch let peeked as Peeked {
            return peeked.seen
        }
    }

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
