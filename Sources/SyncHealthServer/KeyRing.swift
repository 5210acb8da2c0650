import Crypto
import Foundation

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
    /// For an ingest key bound to apps (`KEY@appId`), the apps it may post for; `nil` for any app.
    public var apps: Set<String>?

    /// Whether the key may post events of `appId`.
    public func allows(appId: String) -> Bool { apps?.contains(appId) ?? true }
}

/// The configured API keys, checked in constant time.
public struct KeyRing: Sendable {
    private let entries: [(digest: SHA256Digest, grant: KeyGrant)]

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
        var entries: [(SHA256Digest, KeyGrant)] = order.map { key in
            (Self.digest(key), KeyGrant(scope: .ingest, apps: unbound.contains(key) ? nil : bound[key]))
        }
        for (keys, scope) in [(read, KeyScope.read), (admin, .admin), (metrics, .metrics)] {
            for key in keys where !key.isEmpty { entries.append((Self.digest(key), KeyGrant(scope: scope, apps: nil))) }
        }
        self.entries = entries
        self.protectsMetrics = metrics.contains { !$0.isEmpty }
    }

    /// Whether `GET /metrics` needs a key: a metrics key is configured.
    public let protectsMetrics: Bool

    /// The fewest characters a configured key may have. Generated keys have 47; a short key can be guessed.
    public static let minimumKeyLength = 16

    /// Why configured keys cannot be used.
    public struct ConfigurationError: Error, Equatable, CustomStringConvertible {
        /// The reason, naming the role, never the key.
        public let description: String
    }

    /// A key ring from configured keys, refusing a key shorter than `minimumKeyLength` and a key given two roles
    /// (which one would win would be an accident of order).
    public static func checked(ingest: [String], read: [String], admin: [String], metrics: [String] = []) throws(ConfigurationError) -> KeyRing {
        var roles: [String: KeyScope] = [:]
        let named: [(KeyScope, [String])] = [(.ingest, ingest.map { split($0).key }), (.read, read), (.admin, admin), (.metrics, metrics)]
        for (scope, keys) in named {
            for key in keys where !key.isEmpty {
                guard key.count >= minimumKeyLength else {
                    let article = scope == .ingest || scope == .admin ? "an" : "a"
                    throw ConfigurationError(description: "\(article) \(scope.rawValue) key is shorter than \(minimumKeyLength) characters")
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
        var found: KeyGrant?
        candidate.withUnsafeBytes { candidate in
            for entry in entries {
                let diff = entry.digest.withUnsafeBytes { configured in
                    zip(candidate, configured).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) }
                }
                if diff == 0 { found = entry.grant }
            }
        }
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
