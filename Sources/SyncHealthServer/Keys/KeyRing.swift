import Crypto
import Foundation
public import SyncHealthCore
public import SyncHealthStore

/// What a key may do.
public enum KeyScope: String, Sendable, CaseIterable {
    /// Post events only.
    case ingest
    /// Read status, summaries and alerts.
    case read
    /// Read, and manage webhooks.
    case admin
    /// Scrape `GET /metrics` only (`SYNCHEALTH_METRICS_KEY`); read and admin keys may too.
    case metrics

    /// Whether a key of this scope may do what `required` allows.
    func grants(_ required: KeyScope) -> Bool {
        switch (self, required) {
        case (.admin, .read), (.admin, .admin), (.read, .read), (.ingest, .ingest): true
        case (.metrics, .metrics), (.read, .metrics), (.admin, .metrics): true
        default: false
        }
    }
}

/// What a presented key grants.
public struct KeyGrant: Sendable, Equatable {
    /// What the key may do.
    public var scope: KeyScope
    /// The apps the key is limited to (an ingest key's `KEY@appId`, or a stored key's `appIds`); `nil` for every
    /// app.
    public var apps: Set<String>?
    /// How the API and the audit log name the key: a stored key's id, or `env_` and a digest's first bytes for a
    /// configured one. Never the secret.
    public var id: String = ""
    /// After this a stored key is refused; `nil` for never.
    public var expiresAt: Timestamp?

    /// Whether the key may post events of `appId`.
    public func allows(appId: String) -> Bool { apps?.contains(appId) ?? true }
}

/// The configured API keys, checked in constant time.
public struct KeyRing: Sendable {
    private var entries: [(digest: KeyDigest, grant: KeyGrant)]

    /// Creates a key ring. Empty keys are ignored.
    ///
    /// An ingest key may be bound to apps: `KEY@appId` lets `KEY` post for `appId` only; one entry per app binds
    /// a key to several. A key also listed without `@` may post for any app. An ingest key ships inside the app,
    /// where anyone can read it, so binding it keeps its holder from posting for the operator's other apps.
    public init(ingest: [String], read: [String], admin: [String], metrics: [String] = []) {
        var order: [String] = []
        var unbound = Set<String>()
        var bound: [String: Set<String>] = [:]
        for entry in ingest where !entry.isEmpty {
            let (key, app) = Self.split(entry)
            guard !key.isEmpty else { continue }
            if !unbound.contains(key) && bound[key] == nil { order.append(key) }
            if let app { bound[key, default: []].insert(app) } else { unbound.insert(key) }
        }
        var entries: [(KeyDigest, KeyGrant)] = order.map { key in
            let digest = Self.digest(key)
            return (KeyDigest(digest), KeyGrant(scope: .ingest, apps: unbound.contains(key) ? nil : bound[key], id: Self.configuredId(digest)))
        }
        for (keys, scope) in [(read, KeyScope.read), (admin, .admin), (metrics, .metrics)] {
            for key in keys where !key.isEmpty {
                let digest = Self.digest(key)
                entries.append((KeyDigest(digest), KeyGrant(scope: scope, apps: nil, id: Self.configuredId(digest))))
            }
        }
        self.entries = entries
        self.protectsMetrics = metrics.contains { !$0.isEmpty }
    }

    /// The configured keys and then `stored`: those neither revoked, nor made by a revoked key, nor of an unknown
    /// role. Expiry, the earliest of the key's and its makers' (`KeyLineage`), is checked when a key is presented,
    /// against the service's clock.
    public func adding(_ stored: [StoredKey]) -> KeyRing {
        var ring = self
        let lineage = KeyLineage(stored)
        for key in stored where key.revokedAt == nil {
            guard let scope = KeyScope(rawValue: key.role), scope != .metrics else { continue }
            guard let digest = KeyDigest(bytes: key.secretDigest) else { continue }
            let standing = lineage.standing(of: key.id)
            guard standing?.revokedWith == nil else { continue }
            let grant = KeyGrant(scope: scope, apps: key.appIds.map(Set.init), id: key.id, expiresAt: standing?.expiresAt ?? key.expiresAt)
            ring.entries.append((digest, grant))
        }
        return ring
    }

    /// Every key's grant, for `GET /v1/keys` (which lists the configured ring's, without secrets).
    public var grants: [KeyGrant] { entries.map(\.grant) }

    /// A configured key's id: `env_` and the first 6 bytes of its digest's digest, in hex. It names the key in the
    /// audit log without saying anything about the secret.
    static func configuredId(_ digest: SHA256Digest) -> String {
        "env_" + SHA256.hash(data: Array(digest)).prefix(6).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// Whether `GET /metrics` needs a key: a metrics key is configured.
    public let protectsMetrics: Bool

    /// The fewest characters a configured key may have. Generated keys have 47; a short key can be guessed.
    public static let minimumKeyLength = 16
    /// The fewest bits a configured key may carry by `estimatedBits`: as many as `openssl rand -hex 16` gives.
    public static let minimumKeyBits = 128.0

    /// At most the entropy of `key`, in bits: as if each character were drawn at random from the classes the key
    /// uses (26 lower-case letters, 26 upper-case, 10 digits, 32 other printable ASCII characters; any other
    /// character from 2^16), a character that repeats the one before it counting nothing. It cannot see that a
    /// key is a word or a pattern, so it is a floor that catches short, one-class and repeated keys, not a proof of
    /// randomness: 16 × `a` is 4.7 bits, `openssl rand -hex 16` 165, a generated key 256 or more.
    static func estimatedBits(_ key: String) -> Double {
        var lower = false
        var upper = false
        var digit = false
        var punctuation = false
        var other = false
        var counted = 0
        var previous: Character?
        for character in key {
            if character != previous { counted += 1 }
            previous = character
            switch character {
            case "a"..."z": lower = true
            case "A"..."Z": upper = true
            case "0"..."9": digit = true
            case "!"..."~": punctuation = true
            default: other = true
            }
        }
        let alphabet = (lower ? 26 : 0) + (upper ? 26 : 0) + (digit ? 10 : 0) + (punctuation ? 32 : 0) + (other ? 65_536 : 0)
        return alphabet > 1 ? Double(counted) * log2(Double(alphabet)) : 0
    }

    /// Why configured keys cannot be used.
    public struct ConfigurationError: Error, Equatable, CustomStringConvertible {
        /// The reason, naming the role, never the key.
        public let description: String
    }

    /// A key ring from configured keys, refusing a key shorter than `minimumKeyLength` or with fewer than
    /// `minimumKeyBits` by `estimatedBits`, and a key given two roles
    /// (which one would win would be an accident of order).
    public static func checked(ingest: [String], read: [String], admin: [String], metrics: [String] = []) throws(ConfigurationError) -> KeyRing {
        var roles: [String: KeyScope] = [:]
        let named: [(KeyScope, [String])] = [(.ingest, ingest.map { split($0).key }), (.read, read), (.admin, admin), (.metrics, metrics)]
        for (scope, keys) in named {
            for key in keys where !key.isEmpty {
                let article = scope == .ingest || scope == .admin ? "an" : "a"
                guard key.count >= minimumKeyLength else {
                    throw ConfigurationError(description: "\(article) \(scope.rawValue) key is shorter than \(minimumKeyLength) characters")
                }
                let bits = estimatedBits(key)
                guard bits >= minimumKeyBits else {
                    throw ConfigurationError(
                        description: "\(article) \(scope.rawValue) key carries at most \(Int(bits)) bits, fewer than \(Int(minimumKeyBits)): "
                            + "make one with `openssl rand -hex 32`"
                    )
                }
                if let other = roles[key], other != scope {
                    throw ConfigurationError(description: "one key is given two roles, \(other.rawValue) and \(scope.rawValue)")
                }
                roles[key] = scope
            }
        }
        return KeyRing(ingest: ingest, read: read, admin: admin, metrics: metrics)
    }

    /// `KEY@appId` split at its last `@` (app ids cannot hold one); a key without `@` has no app.
    static func split(_ entry: String) -> (key: String, app: String?) {
        guard let at = entry.lastIndex(of: "@") else { return (entry, nil) }
        let app = String(entry[entry.index(after: at)...])
        return app.isEmpty ? (entry, nil) : (String(entry[..<at]), app)
    }

    /// The scope of `key`, or `nil` if it is not configured.
    ///
    /// Compares SHA-256 digests of every configured key without early exit, so the time taken says nothing
    /// about which key, or how much of one, matched.
    public func scope(of key: String) -> KeyScope? {
        grant(ofDigest: Self.digest(key))?.scope
    }

    /// What the key whose SHA-256 digest is `candidate` grants, in constant time (see `scope(of:)`).
    func grant(ofDigest candidate: SHA256Digest) -> KeyGrant? {
        let candidate = KeyDigest(candidate)
        var found: KeyGrant?
        for entry in entries where entry.digest.difference(candidate) == 0 { found = entry.grant }
        return found
    }

    /// The key's SHA-256 digest: a value, so a request's check allocates nothing.
    static func digest(_ key: some StringProtocol) -> SHA256Digest {
        var hasher = SHA256()
        let hashed = key.utf8.withContiguousStorageIfAvailable { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        if hashed == nil { hasher.update(data: Array(key.utf8)) }
        return hasher.finalize()
    }
}

/// A SHA-256 digest as four words, compared without early exit and without allocating.
struct KeyDigest: Sendable {
    var words: (UInt64, UInt64, UInt64, UInt64)

    init(_ digest: SHA256Digest) { words = digest.withUnsafeBytes(Self.words) }

    /// A stored digest's 32 bytes; `nil` for any other length.
    init?(bytes: [UInt8]) {
        guard bytes.count == SHA256.byteCount else { return nil }
        words = bytes.withUnsafeBytes(Self.words)
    }

    private static func words(_ bytes: UnsafeRawBufferPointer) -> (UInt64, UInt64, UInt64, UInt64) {
        (
            bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self), bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
            bytes.loadUnaligned(fromByteOffset: 16, as: UInt64.self), bytes.loadUnaligned(fromByteOffset: 24, as: UInt64.self)
        )
    }

    /// Zero when equal; every word is looked at whatever the first ones hold.
    func difference(_ other: KeyDigest) -> UInt64 {
        (words.0 ^ other.words.0) | (words.1 ^ other.words.1) | (words.2 ^ other.words.2) | (words.3 ^ other.words.3)
    }
}
