import Hummingbird
import NIOCore
import SyncHealthBuildInfo

/// The dashboard: a page, a script, a style sheet and an icon, embedded in the binary. They carry no data (the
/// page asks for a key and reads the API), so they need none, and are served with a Content-Security-Policy that
/// lets them load nothing but themselves and talk to nothing but this server.
enum DashboardRoutes {
    /// Scripts, styles, images and connections from this origin only; no plugins, frames, forms elsewhere.
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        + "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

    /// Every asset, by path.
    static let assets: [(path: String, contentType: String, bytes: [UInt8])] = [
        ("/", "text/html; charset=utf-8", page(PackageResources.index_html, version: BuildInfo.version)),
        ("/ui/dashboard.js", "text/javascript; charset=utf-8", PackageResources.dashboard_js),
        ("/ui/dashboard.css", "text/css; charset=utf-8", PackageResources.dashboard_css),
        ("/ui/icon.svg", "image/svg+xml", PackageResources.icon_svg),
    ]

    /// The page with the build's version in its footer. The version holds semantic versioning's characters only
    /// (the build refuses others), so it needs no escaping.
    static func page(_ bytes: [UInt8], version: String) -> [UInt8] {
        Array(String(decoding: bytes, as: UTF8.self).replacing("{{version}}", with: version).utf8)
    }

    /// The routes, one per asset.
    static var routes: [APIRoute] {
        assets.map { asset in
            let buffer = ByteBuffer(bytes: asset.bytes)
            var headers: HTTPFields = [.contentType: asset.contentType, .cacheControl: "no-cache", .contentSecurityPolicy: contentSecurityPolicy]
            headers.set("X-Content-Type-Options", "nosniff")
            headers.set("Referrer-Policy", "no-referrer")
            let answer = headers
            return APIRoute(.get, asset.path) { _, _ in Response(status: .ok, headers: answer, body: .init(byteBuffer: buffer)) }
        }
    }
}
