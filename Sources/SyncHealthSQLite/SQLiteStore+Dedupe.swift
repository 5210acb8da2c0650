import SyncHealthCore
import SyncHealthStore

// A group's event ids judged against those recorded before it (the journal's backlog and the tables).
extension SQLiteStore {
    /// Claims as the journal and the tables key them (`EventIds.Claim`).
    static func encoded(_ claims: [EventIdClaim]) -> [EventIds.Claim] {
        claims.map { (key: $0.key, hash: $0.key.stableHash, ids: $0.eventIds.map { Array($0.utf8) }) }
    }

    /// A group's judgement, given which of its claims' ids were `recorded` before it: per claim the ids seen
    /// before, and the ids the group records (each once; a repeat within the group is the planner's to judge).
    static func judged(
        _ claims: [EventIdClaim],
        _ encoded: [EventIds.Claim],
        _ recorded: [[Bool]]
    ) -> (seen: [Set<String>], ids: [(hash: Int64, id: [UInt8])]) {
        var seen: [Set<String>] = []
        seen.reserveCapacity(claims.count)
        var ids: [(hash: Int64, id: [UInt8])] = []
        ids.reserveCapacity(encoded.reduce(0) { $0 + $1.ids.count })
        // One set for the whole group, not one per device: a set is an allocation; sized once, not grown.
        var recordedNow = Set<ClaimedId>(minimumCapacity: ids.capacity)
        for ((claim, encodedClaim), recorded) in zip(zip(claims, encoded), recorded) {
            var before = Set<String>()
            for ((id, bytes), recorded) in zip(zip(claim.eventIds, encodedClaim.ids), recorded) {
                if recorded {
                    before.insert(id)
                } else if recordedNow.insert(ClaimedId(hash: encodedClaim.hash, id: bytes)).inserted {
                    ids.append((encodedClaim.hash, bytes))
                }
            }
            seen.append(before)
        }
        return (seen, ids)
    }

    /// An event id a group records, with its device's hash; its bytes hashed in one call (`EventIdBytes`).
    struct ClaimedId: Hashable {
        var hash: Int64
        var id: [UInt8]

        func hash(into hasher: inout Hasher) {
            hasher.combine(hash)
            id.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }
}
