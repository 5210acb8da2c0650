#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The SSRF guard: resolves a webhook's host and refuses loopback, private, link-local, cloud-metadata and
/// other non-public addresses, unless private targets are allowed.
public struct AddressGuard: Sendable {
    /// Whether loopback and private addresses are allowed (`SYNCHEALTH_WEBHOOK_ALLOW_PRIVATE=1`).
    public var allowPrivate: Bool

    /// Creates the guard.
    public init(allowPrivate: Bool) {
        self.allowPrivate = allowPrivate
    }

    /// Why a URL was refused.
    public enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        case invalidURL
        case unresolvable(String)
        case forbiddenAddress(host: String, address: String)

        public var description: String {
            switch self {
            case .invalidURL: "the URL must be http or https, with a host and no credentials"
            case .unresolvable(let host): "the host \(host) does not resolve"
            case .forbiddenAddress(let host, let address):
                "the host \(host) resolves to \(address), a loopback, private, link-local or metadata address"
            }
        }
    }

    /// Resolves `url`'s host and checks every address. Returns the address to connect to.
    public func check(_ url: String) throws(Refusal) -> (url: WebhookURL, address: String) {
        guard let parsed = WebhookURL(url) else { throw .invalidURL }
        let addresses = Self.resolve(parsed.host)
        guard let first = addresses.first else { throw .unresolvable(parsed.host) }
        if !allowPrivate {
            for address in addresses where !Self.isPublic(address) {
                throw .forbiddenAddress(host: parsed.host, address: address.text)
            }
        }
        return (parsed, first.text)
    }

    /// An IPv4 or IPv6 address.
    struct Address: Equatable {
        var bytes: [UInt8]
        var text: String
    }

    static func resolve(_ host: String) -> [Address] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &result) == 0, let first = result else { return [] }
        defer { freeaddrinfo(first) }
        var addresses: [Address] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor {
            if let sa = info.pointee.ai_addr {
                var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
                if info.pointee.ai_family == AF_INET {
                    var sin = sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
                    let bytes = withUnsafeBytes(of: &sin.sin_addr) { Array($0) }
                    inet_ntop(AF_INET, &sin.sin_addr, &text, socklen_t(text.count))
                    addresses.append(Address(bytes: bytes, text: Self.string(text)))
                } else if info.pointee.ai_family == AF_INET6 {
                    var sin6 = sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee }
                    let bytes = withUnsafeBytes(of: &sin6.sin6_addr) { Array($0) }
                    inet_ntop(AF_INET6, &sin6.sin6_addr, &text, socklen_t(text.count))
                    addresses.append(Address(bytes: bytes, text: Self.string(text)))
                }
            }
            cursor = info.pointee.ai_next
        }
        var seen: [Address] = []
        for a in addresses where !seen.contains(a) { seen.append(a) }
        return seen
    }

    /// A NUL-terminated C string buffer as a String.
    static func string(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether an address is a public unicast address.
    static func isPublic(_ address: Address) -> Bool {
        let b = address.bytes
        if b.count == 4 { return isPublicIPv4(b) }
        guard b.count == 16 else { return false }
        // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d) addresses are judged as IPv4.
        if b[0..<10].allSatisfy({ $0 == 0 }) && ((b[10] == 0xff && b[11] == 0xff) || (b[10] == 0 && b[11] == 0)) {
            return isPublicIPv4(Array(b[12..<16]))
        }
        // SIIT's IPv4-translated form (::ffff:0:a.b.c.d) is judged as IPv4 too.
        if b[0..<8].allSatisfy({ $0 == 0 }) && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0 {
            return isPublicIPv4(Array(b[12..<16]))
        }
        // 6to4 (2002:a.b.c.d::/48) carries the IPv4 address a relay sends to: judged as that address.
        if b[0] == 0x20 && b[1] == 0x02 { return isPublicIPv4(Array(b[2..<6])) }
        // Teredo (2001:0::/32) embeds a server and an obfuscated client address, either of which can be made to
        // name a private one; no webhook receiver needs it.
        if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0 { return false }
        if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8 { return false }  // 2001:db8::/32 documentation
        // 64:ff9b:1::/48, local-use NAT64.
        if b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0x00 && b[5] == 0x01 { return false }
        if b[0] == 0x01 && b[1] == 0x00 && b[2..<8].allSatisfy({ $0 == 0 }) { return false }  // 100::/64 discard
        if b.allSatisfy({ $0 == 0 }) { return false }  // ::
        if b[0..<15].allSatisfy({ $0 == 0 }) && b[15] == 1 { return false }  // ::1
        if b[0] & 0xfe == 0xfc { return false }  // fc00::/7 unique local (incl. fd00:ec2::254)
        if b[0] == 0xfe && b[1] & 0xc0 == 0x80 { return false }  // fe80::/10 link-local
        if b[0] == 0xff { return false }  // multicast
        if b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b { return false }  // 64:ff9b::/96 NAT64
        return true
    }

    static func isPublicIPv4(_ b: [UInt8]) -> Bool {
        switch (b[0], b[1]) {
        case (0, _), (10, _), (127, _): return false  // this network, private, loopback
        case (100, 64...127): return false  // carrier-grade NAT
        case (169, 254): return false  // link-local, cloud metadata
        case (172, 16...31): return false  // private
        case (192, 168): return false  // private
        case (192, 0) where b[2] == 0 || b[2] == 2: return false  // IETF, TEST-NET-1
        case (198, 18...19): return false  // benchmarking
        case (198, 51) where b[2] == 100, (203, 0) where b[2] == 113: return false  // TEST-NET-2, -3
        case (224...255, _): return false  // multicast, reserved, broadcast
        default: return true
        }
    }
}
