import SyncHealthCore
import SyncHealthStore

/// What a stored key may do given the keys that made it: a key made through the API is no stronger than its maker. It
/// expires no later than any key above it, and it is revoked with any of them. Configured keys (`env_…`) end the line.
struct KeyLineage: Sendable {
    /// A key's effective end and, when a key above it was revoked, that key's id.
    struct Standing: Sendable, Hashable {
        var expiresAt: Timestamp?
        var revokedWith: String?
        /// When the key stops (or stopped) working: the first of its revocation, its makers' revocations and its
        /// effective expiry; `nil` for a key that nothing ends. No key ends after a key it made ends, so pruning every key that
        /// ended before a time prunes the keys they made with them and never brings one back.
        var endedAt: Timestamp?
    }

    private let standings: [String: Standing]

    /// Reads the line of every key in `stored`: the walk up `createdBy` stops at a key that is not stored (a configured
    /// key) or at one seen before (a loop, which no API call makes).
    init(_ stored: [StoredKey]) {
        let byId = Dictionary(stored.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var standings: [String: Standing] = [:]
        for key in stored {
            var standing = Standing(expiresAt: key.expiresAt)
            var revokedAt = key.revokedAt
            var seen: Set<String> = [key.id]
            var maker = byId[key.createdBy]
            while let above = maker, seen.insert(above.id).inserted {
                if let end = above.expiresAt { standing.expiresAt = min(standing.expiresAt ?? end, end) }
                if let revoked = above.revokedAt {
                    if standing.revokedWith == nil { standing.revokedWith = above.id }
                    revokedAt = min(revokedAt ?? revoked, revoked)
                }
                maker = byId[above.createdBy]
            }
            standing.endedAt = [revokedAt, standing.expiresAt].compactMap { $0 }.min()
            standings[key.id] = standing
        }
        self.standings = standings
    }

    /// The standing of the stored key `id`; `nil` for a key that is not stored.
    func standing(of id: String) -> Standing? { standings[id] }
}
