public import Hummingbird
import Logging
public import NIOCore

/// The request context: Hummingbird's core storage plus the scope the caller's key grants.
public struct AppRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The scope of the presented key, once `AuthMiddleware` has checked it.
    public var scope: KeyScope?
    /// The apps the key is limited to (an ingest key's `KEY@appId`, a stored key's `appIds`); `nil` for every app.
    public var allowedApps: Set<String>?
    /// The key's id (never its secret), for the audit log.
    public var keyId: String?
    /// The connection, for a long-lived response that must be able to cut its reader off.
    public let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }

    /// Bodies are read explicitly with their own limits; this caps anything else.
    public var maxUploadSize: Int { 2 * 1024 * 1024 }
}
