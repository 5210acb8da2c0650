import Crypto
import Foundation
import Logging
import ServiceLifecycle
import SyncHealthCore
import SyncHealthEngine
import SyncHealthStore
import Synchronization

/// Every key the service accepts: the configured ones (the bootstrap, which the API cannot delete) and the ones
/// made through `POST /v1/keys`, kept in the store as digests. It reads the stored keys again every 500 ms, so that
/// a key revoked on any replica is refused on every replica within a second, and writes when keys were last used
/// at the same pace, never on a request's path.
final class KeyDirectory: Service, Sendable {
    /// How often stored keys are read again and last uses written: a revocation holds everywhere within a second.
    static let refreshInterval = Duration.milliseconds(500)
    /// A key's last use is remembered at most this often: a busy key costs one map write a minute, not one a request.
    static let useResolution = Duration.seconds(60)

    let configured: KeyRing
    let store: any AccessStore
    let clock: any ServiceClock
    let logger: Logger
    /// How long the audit log is kept (`SYNCHEALTH_ALERT_RETENTION`); `nil` for ever.
    let auditRetention: Duration?
    private let state: Mutex<State>

    private struct State {
        var ring: KeyRing
        var loaded = false
        /// The number of the last read begun, and of the read the ring holds: a read begun before a revocation's
        /// own read but finished after it must not bring the revoked key back.
        var begun = 0
        var installed = 0
        /// Uses not yet written, by key id.
        var unwritten: [String: Timestamp] = [:]
        /// The last use noted per key, to note each at most once per `useResolution`.
        var noted: [String: Timestamp] = [:]
    }

    init(configured: KeyRing, store: any AccessStore, clock: any ServiceClock, auditRetention: Duration?, logger: Logger) {
        self.configured = configured
        self.store = store
        self.clock = clock
        self.auditRetention = auditRetention
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
            guard let grant = s.ring.grants.first(where: { $0.id == id }) else { return false }
            return grant.expiresAt.map { $0 > now } ?? true
        }
    }

    /// Reads the stored keys again.
    func reload() async throws {
        let number = state.withLock { s in
            s.begun += 1
            return s.begun
        }
        let stored = try await store.keys()
        let ring = configured.adding(stored)
        state.withLock { s in
            guard number > s.installed else { return }
            s.ring = ring
            s.installed = number
            s.loaded = true
        }
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
