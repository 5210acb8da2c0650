import Crypto
import Foundation

/// Standard Webhooks signing: `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, keyed by
/// the secret's decoded bytes.
public struct WebhookSigner: Sendable {
    /// The prefix of every secret.
    public static let secretPrefix = "whsec_"

    let key: SymmetricKey

    /// A signer for `secret` (`whsec_` + base64); `nil` if the secret is malformed.
    public init?(secret: String) {
        guard secret.hasPrefix(Self.secretPrefix), let bytes = Data(base64Encoded: String(secret.dropFirst(Self.secretPrefix.count))),
            !bytes.isEmpty
        else { return nil }
        key = SymmetricKey(data: bytes)
    }

    /// A new random secret: `whsec_` + base64 of 32 random bytes.
    public static func makeSecret() -> String {
        secretPrefix + SymmetricKey(size: .bits256).withUnsafeBytes { Data($0).base64EncodedString() }
    }

    /// The `webhook-signature` value for one message.
    public func signature(id: String, timestamp: Int64, body: [UInt8]) -> String {
        var hmac = HMAC<SHA256>(key: key)
        hmac.update(data: Array("\(id).\(timestamp).".utf8))
        hmac.update(data: body)
        return "v1," + Data(hmac.finalize()).base64EncodedString()
    }

    /// The three Standard Webhooks headers, plus the content type.
    public func headers(id: String, timestamp: Int64, body: [UInt8]) -> [(name: String, value: String)] {
        [
            ("content-type", "application/json"),
            ("webhook-id", id),
            ("webhook-timestamp", String(timestamp)),
            ("webhook-signature", signature(id: id, timestamp: timestamp, body: body)),
        ]
    }

    /// Verifies a `webhook-signature` header (any of its space-separated `v1,` signatures), in constant time.
    public func verify(id: String, timestamp: Int64, body: [UInt8], signatureHeader: String) -> Bool {
        let expected = Array(signature(id: id, timestamp: timestamp, body: body).utf8)
        var ok = false
        for candidate in signatureHeader.split(separator: " ") {
            let bytes = Array(candidate.utf8)
            guard bytes.count == expected.count else { continue }
            var diff: UInt8 = 0
            for i in 0..<bytes.count { diff |= bytes[i] ^ expected[i] }
            if diff == 0 { ok = true }
        }
        return ok
    }
}
