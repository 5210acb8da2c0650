import Crypto
import Foundation
import Logging
import ServiceLifecycle
import SyncHealthCore
import SyncHealthEngine
import SyncHealthStore
import Synchronization

/// What a replica knows to sign and check device tokens: the secrets (from the store, shared by replicas) and the
/// keys revoked (read from the store every `refreshInterval`, and at once for those this replica revokes). Checking
/// a token reads only this memory.
final class DeviceTokenKeys: Sendable {
    struct State {
        var secrets: [[UInt8]: DeviceTokenSecret] = [:]
        /// The secrets as HMAC keys, made once.
        var keys: [[UInt8]: SymmetricKey] = [:]
        /// Revoked key ids, with when; forgotten once every token made for them has expired.
        var revoked: [[UInt8]: Timestamp] = [:]
        var lastRevocation: Int64 = 0
        /// When a token naming an unknown secret last made this replica read the store.
        var lastUnknownSecretRead: Timestamp?
    }

    private let state = Mutex(State())
    let store: any AttestationStore
    /// How long a token is valid (`SYNCHEALTH_DEVICE_TOKEN_TTL`).
    let lifetime: Duration

    /// A new secret is made when the newest is this old; tokens it signed verify until they expire.
    static let rotation: Duration = .seconds(24 * 3600)
    /// A secret signs only once it is this old, so that every replica has read it before a token it signed arrives.
    static let settle: Duration = .seconds(5)
    /// How often revocations and secrets are read: a key revoked on another replica refuses its tokens here within it.
    static let refreshInterval: Duration = .milliseconds(500)

    init(store: any AttestationStore, lifetime: Duration) {
        self.store = store
        self.lifetime = lifetime
    }

    /// Reads what changed: new revocations, the secrets; makes a secret when none signs yet or the newest is due for
    /// rotation, and forgets what no unexpired token needs.
    func refresh(now: Timestamp) async throws {
        var after = state.withLock { $0.lastRevocation }
        var fresh: [AttestationRevocation] = []
        while true {
            let page = try await store.attestationRevocations(after: after, limit: 1000)
            fresh += page
            guard page.count == 1000, let last = page.last else { break }
            after = last.seq
        }
        var secrets = try await store.deviceTokenSecrets()
        if secrets.last.map({ now - $0.createdAt >= Self.rotation }) ?? true {
            let made = DeviceTokenSecret(id: Self.random(8), secret: Self.random(32), createdAt: now)
            try await store.insertDeviceTokenSecret(made)
            secrets.append(made)
        }
        let horizon = now - Self.rotation - lifetime - .seconds(60)
        if secrets.contains(where: { $0.createdAt < horizon }) {
            try await store.deleteDeviceTokenSecrets(createdBefore: horizon)
            secrets.removeAll { $0.createdAt < horizon }
        }
        let forgetBefore = now - lifetime - .seconds(60)
        state.withLock { s in
            for revocation in fresh { s.revoked[revocation.keyId] = revocation.revokedAt }
            s.lastRevocation = fresh.last?.seq ?? s.lastRevocation
            s.revoked = s.revoked.filter { $0.value >= forgetBefore }
            s.secrets = Dictionary(secrets.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
            s.keys = s.secrets.mapValues { SymmetricKey(data: $0.secret) }
        }
        if fresh.contains(where: { $0.revokedAt < forgetBefore }) {
            try await store.pruneAttestationRevocations(before: forgetBefore)
        }
    }

    /// Refuses this key's tokens here at once (this replica replaced or erased it; the others read it from the store).
    func revoke(_ keyId: [UInt8], at now: Timestamp) {
        state.withLock { $0.revoked[keyId] = now }
    }

    /// A token for `device`'s key `keyId`, valid for `lifetime` from `now`; `nil` before any secret is known.
    func issue(device: DeviceKey, keyId: [UInt8], now: Timestamp) -> (token: String, expiresAt: Timestamp)? {
        let signer = state.withLock { s -> DeviceTokenSecret? in
            let sorted = s.secrets.values.sorted { $0.createdAt < $1.createdAt }
            // The newest that every replica has had time to read, or the only one there is.
            return sorted.last { now - $0.createdAt >= Self.settle } ?? sorted.first
        }
        guard let signer else { return nil }
        let token = DeviceToken(secretId: signer.id, expiresAt: now + lifetime, keyId: keyId, device: device)
        return (token.signed(with: signer.secret), token.expiresAt)
    }

    /// Checks a token's text for an upload of `device` at `now`: the key id it is bound to, or why it is refused.
    /// One look at this replica's memory; a secret not known yet is read from the store once before the token is
    /// called forged.
    func check(_ text: Substring, device: DeviceKey, now: Timestamp) async throws -> Result<[UInt8], DeviceTokenFailure> {
        guard let parsed = DeviceToken.parse(text) else { return .failure(.malformed) }
        if let known = check(parsed, device: device, now: now) { return known }
        // A secret made on another replica in the last moments, or a forgery: read once, at most once a second, so
        // that forged ids cannot make every request a store read.
        let readAgain = state.withLock { s in
            guard s.lastUnknownSecretRead.map({ now - $0 >= .seconds(1) }) ?? true else { return false }
            s.lastUnknownSecretRead = now
            return true
        }
        if readAgain {
            try await refresh(now: now)
            if let known = check(parsed, device: device, now: now) { return known }
        }
        return .failure(.forged)
    }

    /// The check against the secrets in memory; `nil` when none has the token's secret id.
    private func check(
        _ parsed: (token: DeviceToken, signedBytes: ArraySlice<UInt8>, mac: ArraySlice<UInt8>),
        device: DeviceKey,
        now: Timestamp
    ) -> Result<[UInt8], DeviceTokenFailure>? {
        let (key, revoked) = state.withLock { s in (s.keys[parsed.token.secretId], s.revoked[parsed.token.keyId] != nil) }
        guard let key else { return nil }
        guard HMAC<SHA256>.isValidAuthenticationCode(parsed.mac, authenticating: parsed.signedBytes, using: key) else { return .failure(.forged) }
        guard parsed.token.expiresAt > now else { return .failure(.expired) }
        guard parsed.token.device == device else { return .failure(.otherDevice) }
        guard !revoked else { return .failure(.revoked) }
        return .success(parsed.token.keyId)
    }

    static func random(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }
}

/// Keeps a replica's `DeviceTokenKeys` current: reads revocations and secrets every `refreshInterval`.
struct DeviceTokenRefresh: Service {
    let keys: DeviceTokenKeys
    let clock: any ServiceClock
    let logger: Logger

    func run() async throws {
        // Real time whatever the service's clock: it is how fast replicas learn of each other's revocations.
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await keys.refresh(now: clock.now)
                } catch {
                    logger.warning("Cannot read device token secrets and revocations", metadata: ["error": "\(String(reflecting: error))"])
                }
                try await Task.sleep(for: DeviceTokenKeys.refreshInterval)
            }
        }
    }
}
