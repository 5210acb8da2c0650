import CCurl
import Foundation

/// A webhook URL, checked: http or https, a host, no credentials, and no IPv6 zone.
///
/// Parsed by libcurl's own URL parser, so that the host the SSRF guard resolves is the host libcurl connects
/// to: an internationalised host is in its ASCII form (`bücher.test` is `xn--bcher-kva.test`), as libcurl would
/// look it up, and `text` is the URL with that host, which is what the transport sends to.
public struct WebhookURL: Sendable, Equatable {
    /// `http` or `https`.
    public var scheme: String
    /// The host name in ASCII, or an IP literal (without brackets).
    public var host: String
    /// The port, explicit or the scheme's default.
    public var port: Int
    /// The whole URL as libcurl fetches it, its host in ASCII.
    public var text: String

    /// Parses and checks `text`; `nil` if it is not an acceptable webhook URL.
    public init?(_ text: String) {
        guard text.utf8.count <= 2048, !text.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else { return nil }
        // libcurl reads `http:///x` as `http://x/`; a URL without its host where the host belongs is a mistake.
        guard let separator = text.range(of: "://"), text[separator.upperBound...].first.map({ $0 != "/" && $0 != "\\" }) == true else {
            return nil
        }
        _ = CurlTransport.globalInit
        var parts = ccurl_url_parts()
        guard ccurl_url_parse(text, &parts) == CURLUE_OK else { return nil }
        defer { ccurl_url_parts_free(&parts) }
        guard let url = parts.url, let scheme = parts.scheme, let host = parts.host, let port = parts.port,
            parts.has_userinfo_or_zone == 0
        else { return nil }
        self.scheme = String(cString: scheme).lowercased()
        var hostText = String(cString: host).lowercased()
        if hostText.hasPrefix("[") && hostText.hasSuffix("]") { hostText = String(hostText.dropFirst().dropLast()) }
        self.host = hostText
        self.text = String(cString: url)
        guard self.scheme == "http" || self.scheme == "https", !hostText.isEmpty,
            hostText.utf8.allSatisfy({ $0 < 0x80 && $0 != UInt8(ascii: "%") }),
            let port = Int(String(cString: port)), (1...65535).contains(port)
        else { return nil }
        self.port = port
    }
}
