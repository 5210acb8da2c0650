import Crypto
import Foundation
import Logging
import ServiceLifecycle
import SyncHealthCore
import SyncHealthEngine
import SyncHealthStore
import Synchronization

/// Every key the service accepts: the configured ones (the bootstrap, which the API cannot delete) and the ones
/// made through `POST /v1/keys`, kept in the store as digests. Every 500 ms it reads the keys changed since its last
/// read, so that a key revoked on any replica is refused on every replica within a second while an idle service reads
/// nothing; and it writes when keys were last used at the same pace, never on a request's path. Keys that ended
/// (revoked or expired) longer ago than the audit log is kept are forgotten.
final class KeyDirectory: Service, Sendable {
    /// How often changed keys are read and last uses written: a revocation holds everywhere within a second.
    static let refreshInterval = Duration.milliseconds(500)
    /// How often every key is read again, to let go of keys another replica pruned.
    static let fullReadInterval = Duration.seconds(600)
    /// A key's last use is remembered at most this often: a busy key costs one map write a minute, not one a request.
    static let useResolution = Duration.seconds(60)
    /// The default of `limit`.
    static let defaultLimit = 1000

    let configured: KeyRing
    let store: any AccessStore
    let clock: any ServiceClock
    let logger: Logger
    /// How long the audit log is kept (`SYNCHEALTH_ALERT_RETENTION`), and ended keys with it; `nil` for ever.
    let auditRetention: Duration?
    /// The most live stored keys for one app, and for every app (`SYNCHEALTH_KEY_LIMIT`).
    let limit: Int
    private let state: Mutex<State>

    private struct State {
        var ring: KeyRing
        var loaded = false
        /// Every stored key with the number of its last change; merged by that number, so that a read that finishes
        /// late never brings back what a later read saw change.
        var stored: [String: KeyChange] = [:]
        var lineage = KeyLineage([])
        /// The highest change read.
        var cursor: Int64 = 0
        var fullReadAt: ContinuousClock.Instant?
        /// Uses not yet written, by key id.
        var unwritten: [String: Timestamp] = [:]
        /// The last use noted per key, to note each at most once per `useResolution`.
        var noted: [String: Timestamp] = [:]

        /// The ring and the lineage of `stored`.
        mutating func rebuild(_ configured: KeyRing) {
            let keys = stored.values.map(\.key).sorted { KeyPosition(after: $0) < KeyPosition(after: $1) }
            lineage = KeyLineage(keys)
            ring = configured.adding(keys)
        }
    }

    init(
        configured: KeyRing,
        store: any AccessStore,
        clock: any ServiceClock,
        auditRetention: Duration?,
        limit: Int = KeyDirectory.defaultLimit,
        logger: Logger
    ) {
        self.configured = configured
        self.store = store
        self.clock = clock
        self.auditRetention = auditRetention
        self.limit = limit
        self.logger = logger
        state = Mutex(State(ring: configured))
    }

    /// Whether the stored keys have been read once: until then only configured keys work, and `/readyz` fails.
    var isLoaded: Bool { state.withLock { $0.loaded } }

    /// What the key whose digest is `digest` grants now: `nil` for an unknown, revoked or expired key.
    func grant(ofDigest digest: SHA256Digest) -> KeyGrant? {
        let now = clock.now
        return state.withLock { s -> KeyGrant? in
            guard let grant = s.ring.grant(ofDigest: digest) else { return nil }
            if let end = grant.expiresAt, end <= now { return nil }
            if !grant.id.hasPrefix("env_"), s.noted[grant.id].map({ now - $0 >= Self.useResolution }) ?? true {
                s.noted[grant.id] = now
                s.unwritten[grant.id] = now
            }
            return grant
        }
    }

    /// Whether the key `id` is still accepted now: not revoked (nor made by a revoked key), not expired. A live stream
    /// asks it while it lasts.
    func accepts(id: String) -> Bool {
        let now = clock.now
        return state.withLock { s in
            if s.stored[id] == nil { return s.ring.grants.contains { $0.id == id } }
            guard let standing = s.lineage.standing(of: id), standing.revokedWith == nil, s.stored[id]?.key.revokedAt == nil else {
                return false
            }
            return standing.expiresAt.map { $0 > now } ?? true
        }
    }

    /// The stored key `id` as last read, and its standing among the keys that made it.
    func stored(id: String) -> (key: StoredKey, standing: KeyLineage.Standing?)? {
        state.withLock { s in s.stored[id].map { ($0.key, s.lineage.standing(of: id)) } }
    }

    /// The standing of the stored keys `ids`, as last read.
    func standings(of ids: [String]) -> [String: KeyLineage.Standing] {
        state.withLock { s in
            var standings: [String: KeyLineage.Standing] = [:]
            for id in ids { standings[id] = s.lineage.standing(of: id) }
            return standings
        }
    }

    /// How many live stored keys (neither ended nor made by an ended key) name the app of `appIds` that has the
    /// most, or, for `nil`, are for every app: what `limit` caps.
    func liveCount(appIds: [String]?) -> Int {
        let now = clock.now
        return state.withLock { s in
            var counts: [String: Int] = [:]
            var global = 0
            for change in s.stored.values {
                guard let standing = s.lineage.standing(of: change.key.id), standing.endedAt.map({ $0 > now }) ?? true else { continue }
                if let apps = change.key.appIds { for app in apps { counts[app, default: 0] += 1 } } else { global += 1 }
            }
            return appIds.map { $0.map { counts[$0] ?? 0 }.max() ?? 0 } ?? global
        }
    }

    /// Reads the keys changed since the last read; every key when `full`, on the first read and every
    /// `fullReadInterval`.
    func reload(full: Bool = false) async throws {
        let started = ContinuousClock.now
        let (after, full) = state.withLock { s in
            (s.cursor, full || s.fullReadAt.map { started - $0 >= Self.fullReadInterval } ?? true)
        }
        let read = try await store.keyChanges(after: full ? 0 : after)
        state.withLock { s in
            var changed = !s.loaded
            for change in read.changes where change.seq > s.stored[change.key.id]?.seq ?? 0 {
                s.stored[change.key.id] = change
                changed = true
            }
            if full {
                // A key the read did not see although its last change was numbered before the read was deleted (pruned).
                let seen = Set(read.changes.map(\.key.id))
                for (id, change) in s.stored where change.seq <= read.through && !seen.contains(id) {
                    s.stored[id] = nil
                    changed = true
                }
                s.fullReadAt = started
                s.loaded = true
            }
            s.cursor = max(s.cursor, read.through, read.changes.last?.seq ?? 0)
            if changed { s.rebuild(configured) }
        }
    }

    /// Forgets the stored keys that ended before `cutoff`, with the keys they made (which ended no later).
    func prune(endedBefore cutoff: Timestamp) async throws {
        let ended = state.withLock { s in
            s.stored.keys.filter { id in s.lineage.standing(of: id)?.endedAt.map { $0 < cutoff } ?? false }
        }
        guard !ended.isEmpty else { return }
        let deleted = try await store.deleteKeys(ids: ended)
        state.withLock { s in
            for id in ended { s.stored[id] = nil }
            s.rebuild(configured)
        }
        logger.info("Forgot ended API keys", metadata: ["keys.count": "\(deleted)"])
    }

    /// Writes the last uses noted since the previous write.
    func writeUses() async throws {
        let used = state.withLock { s in
            defer { s.unwritten = [:] }
            return s.unwritten
        }
        guard !used.isEmpty else { return }
        do {
            try await store.touchKeys(used)
        } catch {
            state.withLock { s in s.unwritten.merge(used) { max($0, $1) } }
            throw error
        }
    }

    func run() async throws {
        // The pace is real time whatever the service's clock: it is how fast replicas learn of each other's keys.
        try? await cancelWhenGracefulShutdown {
            var pruned: Timestamp?
            while !Task.isCancelled {
                do {
                    try await self.reload()
                    try await self.writeUses()
                    let now = self.clock.now
                    if let retention = self.auditRetention, pruned.map({ now - $0 >= .seconds(3600) }) ?? true {
                        while try await self.store.pruneAudit(before: now - retention, limit: 10_000) == 10_000 {}
                        try await self.prune(endedBefore: now - retention)
                        pruned = now
                    }
                } catch {
                    self.logger.warning("Cannot read the stored API keys", metadata: ["error": "\(String(reflecting: error))"])
                }
                try await Task.sleep(for: Self.refreshInterval)
            }
        }
        try? await writeUses()
    }
}
