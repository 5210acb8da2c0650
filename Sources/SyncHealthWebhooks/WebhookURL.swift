import Foundation

/// A webhook URL, checked: http or https, a host, no credentials.
public struct WebhookURL: Sendable, Equatable {
    /// `http` or `https`.
    public var scheme: String
    /// The host name or IP literal (without brackets).
    public var host: String
    /// The port, explicit or the scheme's default.
    public var port: Int

    /// Parses and checks `text`; `nil` if it is not an acceptable webhook URL.
    public init?(_ text: String) {
        guard text.utf8.count <= 2048, let components = URLComponents(string: text),
            let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
            var host = components.host, !host.isEmpty,
            components.user == nil, components.password == nil
        else { return nil }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        self.scheme = scheme
        self.host = host.lowercased()
        self.port = components.port ?? (scheme == "https" ? 443 : 80)
        guard (1...65535).contains(port) else { return nil }
    }
}
