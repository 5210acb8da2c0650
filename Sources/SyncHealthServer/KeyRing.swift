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

/// The configured API keys, checked in constant time.
public struct KeyRing: Sendable {
    private let entries: [(digest: [UInt8], scope: KeyScope)]

    /// Creates a key ring. Empty keys are ignored.
    public init(ingest: [String], read: [String], admin: [String]) {
        var entries: [([UInt8], KeyScope)] = []
        for (keys, scope) in [(ingest, KeyScope.ingest), (read, .read), (admin, .admin)] {
            for key in keys where !key.isEmpty { entries.append((Self.digest(key), scope)) }
        }
        self.entries = entries
    }

    /// The scope of `key`, or `nil` if it is not configured.
    ///
    /// Compares SHA-256 digests of every configured key without early exit, so the time taken says nothing
    /// about which key, or how much of one, matched.
    public func scope(of key: String) -> KeyScope? {
        scope(ofDigest: Self.digest(key))
    }

    /// The scope of the key whose SHA-256 digest is `candidate`, in constant time (see `scope(of:)`).
    func scope(ofDigest candidate: [UInt8]) -> KeyScope? {
        var found: KeyScope?
        for entry in entries {
            var diff: UInt8 = 0
            for i in 0..<min(candidate.count, entry.digest.count) { diff |= candidate[i] ^ entry.digest[i] }
            if diff == 0 && candidate.count == entry.digest.count { found = entry.scope }
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
