import Crypto
import Foundation
import SyncHealthCore
import SyncHealthStore

/// A device token: what an attested device sends instead of an assertion on each upload
/// (`SyncHealth-Device-Token`), after proving its key once (`POST /v1/attest/token`). A bearer credential for one
/// device of one app, bound to its attested key, until it expires: checking it costs one HMAC, not a P-256
/// verification.
///
/// Layout: `sht_` and base64url (no padding) of version (1 byte, 1) ‖ the secret's id (8) ‖ expiry in microseconds
/// (8, big-endian) ‖ the key id (32) ‖ the app id's length (1) and UTF-8 ‖ the device id's length (1) and UTF-8 ‖
/// HMAC-SHA256 of all that with the secret (32).
struct DeviceToken: Sendable, Hashable {
    var secretId: [UInt8]
    var expiresAt: Timestamp
    var keyId: [UInt8]
    var device: DeviceKey

    static let prefix = "sht_"
    static let version: UInt8 = 1
    static let macLength = 32

    /// The token's text, signed with `secret`.
    func signed(with secret: [UInt8]) -> String {
        var bytes = payload
        bytes += HMAC<SHA256>.authenticationCode(for: bytes, using: SymmetricKey(data: secret))
        return Self.prefix + Data(bytes).base64EncodedString().base64URL
    }

    var payload: [UInt8] {
        var bytes: [UInt8] = [Self.version] + secretId
        bytes += (0..<8).reversed().map { UInt8(truncatingIfNeeded: UInt64(bitPattern: expiresAt.microseconds) >> ($0 * 8)) }
        bytes += keyId
        for text in [device.appId, device.deviceId] {
            bytes.append(UInt8(clamping: text.utf8.count))
            bytes += text.utf8
        }
        return bytes
    }

    /// Reads a token's text: its fields and MAC, unchecked; `nil` for text that is not a token of this layout.
    static func parse(_ text: Substring) -> (token: DeviceToken, signedBytes: ArraySlice<UInt8>, mac: ArraySlice<UInt8>)? {
        guard text.hasPrefix(prefix), text.utf8.count <= 1024, let bytes = base64URLDecoded(text.utf8.dropFirst(prefix.utf8.count)) else {
            return nil
        }
        guard bytes.count > 1 + 8 + 8 + 32 + 2 + macLength, bytes[0] == version else { return nil }
        let signedBytes = bytes[..<(bytes.count - macLength)]
        var offset = 1
        func take(_ count: Int) -> ArraySlice<UInt8>? {
            guard offset + count <= signedBytes.count else { return nil }
            defer { offset += count }
            return signedBytes[offset..<(offset + count)]
        }
        guard let secretId = take(8), let expiry = take(8), let keyId = take(32), let appLength = take(1),
            let app = take(Int(appLength[appLength.startIndex])),
            let deviceLength = take(1), let deviceId = take(Int(deviceLength[deviceLength.startIndex])), offset == signedBytes.count,
            let appId = String(validating: app, as: UTF8.self), let device = String(validating: deviceId, as: UTF8.self)
        else { return nil }
        let micros = expiry.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let token = DeviceToken(
            secretId: Array(secretId),
            expiresAt: Timestamp(microseconds: Int64(bitPattern: micros)),
            keyId: Array(keyId),
            device: DeviceKey(appId: appId, deviceId: device)
        )
        return (token, signedBytes, bytes[(bytes.count - macLength)...])
    }
}

extension DeviceToken {
    /// The values of base64url's alphabet (RFC 4648 §5), 0xFF for any other byte.
    private static let alphabet: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, character) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8.enumerated() {
            table[Int(character)] = UInt8(value)
        }
        return table
    }()

    /// Decodes unpadded base64url over bytes: every upload with a token reads one, and Foundation's string
    /// replacements to make standard base64 of it cost several times the rest of the check (callgrind).
    static func base64URLDecoded(_ text: some Collection<UInt8>) -> [UInt8]? {
        guard text.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(text.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in text {
            let value = alphabet[Int(character)]
            guard value != 0xFF else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // What is left over must be the zero padding of the last group.
        guard accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return out
    }
}

/// Why a device token was refused: each its own problem type.
public enum DeviceTokenFailure: Error, Sendable, Hashable {
    /// Not a token of this service's layout (truncated, altered in its framing, garbage).
    case malformed
    /// The MAC does not verify, or no secret of this service has its id.
    case forged
    case expired
    /// Made for another device or app than the upload names.
    case otherDevice
    /// Its key was replaced by a new attestation, or the device was erased.
    case revoked

    /// The problem type's last part.
    public var slug: String {
        switch self {
        case .malformed: "token-malformed"
        case .forged: "token-forged"
        case .expired: "token-expired"
        case .otherDevice: "token-device"
        case .revoked: "token-revoked"
        }
    }
}

extension String {
    /// Standard base64 made URL-safe, without padding (RFC 4648 §5).
    fileprivate var base64URL: String {
        var text = replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }
}
