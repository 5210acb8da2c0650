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
        /// Each secret's HMAC, keyed once: a copy of it authenticates a token without hashing the key's pads again.
        var macs: [[UInt8]: HMAC<SHA256>] = [:]
        /// Revoked key ids, with when; forgotten once every token made for them has expired.
        var revoked: [[UInt8]: Timestamp] = [:]
        var lastRevocation: Int64 = 0
        /// When a token naming an unknown secret last made this replica read the store.
        var lastUnknownSecretRead: Timestamp?
        /// When the secrets were last read.
        var secretsReadAt: Timestamp?
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

    /// Reads what changed: new revocations, and the secrets when `secretsDue` (or when none is known yet); makes a
    /// secret when none signs yet or the newest is due for rotation, and forgets what no unexpired token needs.
    func refresh(now: Timestamp) async throws {
        try await readRevocations(now: now)
        try await readSecrets(now: now)
    }

    /// Whether the secrets are due to be read again: every `secretsInterval`, and at once while none is known.
    func secretsDue(now: Timestamp) -> Bool {
        state.withLock { s in s.secrets.isEmpty || s.secretsReadAt.map { now - $0 >= Self.secretsInterval } ?? true }
    }

    /// How often the secrets are read again: they change once a day, and a token naming one not read yet makes this
    /// replica read them at once.
    static let secretsInterval: Duration = .seconds(60)

    /// Reads the revocations written since the last read.
    func readRevocations(now: Timestamp) async throws {
        var after = state.withLock { $0.lastRevocation }
        var fresh: [AttestationRevocation] = []
        while true {
            let page = try await store.attestationRevocations(after: after, limit: 1000)
            fresh += page
            guard page.count == 1000, let last = page.last else { break }
            after = last.seq
        }
        guard !fresh.isEmpty else { return }
        state.withLock { s in
            for revocation in fresh { s.revoked[revocation.keyId] = revocation.revokedAt }
            s.lastRevocation = fresh.last?.seq ?? s.lastRevocation
        }
    }

    /// Reads the secrets, makes one when none signs yet or the newest is due for rotation, and forgets those no
    /// unexpired token names.
    func readSecrets(now: Timestamp) async throws {
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
        // Revocations older than any unexpired token are forgotten, here and in the store, at the same pace.
        let forgetBefore = now - lifetime - .seconds(60)
        state.withLock { s in
            s.secrets = Dictionary(secrets.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
            s.macs = s.secrets.mapValues { HMAC<SHA256>(key: SymmetricKey(data: $0.secret)) }
            s.secretsReadAt = now
            s.revoked = s.revoked.filter { $0.value >= forgetBefore }
        }
        try await store.pruneAttestationRevocations(before: forgetBefore)
        // Expired challenges too: new challenges clear a few each, and an idle service clears them here.
        while try await store.pruneChallenges(before: now, limit: 1000) == 1000 {}
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
        let (keyed, revoked) = state.withLock { s in (s.macs[parsed.token.secretId], s.revoked[parsed.token.keyId] != nil) }
        guard var mac = keyed else { return nil }
        parsed.signedBytes.withUnsafeBytes { mac.update(data: $0) }
        // Constant time: the comparison does not stop at the first byte that differs.
        let code = mac.finalize()
        let equal = code.withUnsafeBytes { computed in
            zip(computed, parsed.mac).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0 && computed.count == parsed.mac.count
        }
        guard equal else { return .failure(.forged) }
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

/// Keeps a replica's App Attest state current: reads revocations every `refreshInterval`, the secrets every
/// `secretsInterval` (and then forgets expired challenges and revocations).
struct DeviceTokenRefresh: Service {
    let keys: DeviceTokenKeys
    let clock: any ServiceClock
    let logger: Logger

    func run() async throws {
        // Real time whatever the service's clock: it is how fast replicas learn of each other's revocations.
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    let now = clock.now
                    try await keys.readRevocations(now: now)
                    if keys.secretsDue(now: now) { try await keys.readSecrets(now: now) }
                } catch {
                    logger.warning("Cannot read device token secrets and revocations", metadata: ["error": "\(String(reflecting: error))"])
                }
                try await Task.sleep(for: DeviceTokenKeys.refreshInterval)
            }
        }
    }
}
