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

    /// Whether a key of this scope may do what `required` allows.
    func grants(_ required: KeyScope) -> Bool {
        switch (self, required) {
        case (.admin, .read), (.admin, .admin), (.read, .read), (.ingest, .ingest): true
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
    private let entries: [(digest: [UInt8], grant: KeyGrant)]

    /// Creates a key ring. Empty keys are ignored.
    ///
    /// An ingest key may be bound to apps: `KEY@appId` lets `KEY` post for `appId` only; one entry per app binds
    /// a key to several. A key also listed without `@` may post for any app. An ingest key ships inside the app,
    /// where anyone can read it, so binding it keeps its holder from posting for the operator's other apps.
    public init(ingest: [String], read: [String], admin: [String]) {
        var order: [String] = []
        var unbound = Set<String>()
        var bound: [String: Set<String>] = [:]
        for entry in ingest where !entry.isEmpty {
            let (key, app) = Self.split(entry)
            guard !key.isEmpty else { continue }
            if !unbound.contains(key) && bound[key] == nil { order.append(key) }
            if let app { bound[key, default: []].insert(app) } else { unbound.insert(key) }
        }
        var entries: [([UInt8], KeyGrant)] = order.map { key in
            (Self.digest(key), KeyGrant(scope: .ingest, apps: unbound.contains(key) ? nil : bound[key]))
        }
        for (keys, scope) in [(read, KeyScope.read), (admin, .admin)] {
            for key in keys where !key.isEmpty { entries.append((Self.digest(key), KeyGrant(scope: scope, apps: nil))) }
        }
        self.entries = entries
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
    func grant(ofDigest candidate: [UInt8]) -> KeyGrant? {
        var found: KeyGrant?
        for entry in entries {
            var diff: UInt8 = 0
            for i in 0..<min(candidate.count, entry.digest.count) { diff |= candidate[i] ^ entry.digest[i] }
            if diff == 0 && candidate.count == entry.digest.count { found = entry.grant }
        }
        return found
    }

    static func digest(_ key: some StringProtocol) -> [UInt8] {
        var key = String(key)
        return key.withUTF8 { Array(SHA256.hash(data: $0)) }
    }

    /// Lowercase hexadecimal of `bytes`.
    static func hex(_ bytes: some Collection<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(unsafeUninitializedCapacity: bytes.count * 2) { buffer in
            var i = 0
            for byte in bytes {
                buffer[i] = digits[Int(byte >> 4)]
                buffer[i + 1] = digits[Int(byte & 0x0f)]
                i += 2
            }
            return i
        }
    }
}
