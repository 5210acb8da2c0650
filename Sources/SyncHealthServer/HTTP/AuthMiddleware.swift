import Crypto
import HTTPTypes
import Hummingbird
import SyncHealthEngine

/// Reads `Authorization: Bearer <key>`, or `X-SyncHealth-Key: <key>` where there is no bearer token (Apple's URL
/// Loading System manages `Authorization` itself, so the client package sends both), and records the key's scope
/// in the context. Routes then require a scope with `context.require(_:)`. Keys are never logged.
struct AuthMiddleware: RouterMiddleware {
    /// The header the client package sends its key in beside `Authorization`.
    static let keyHeader = HTTPField.Name("X-SyncHealth-Key")

    typealias Context = AppRequestContext
    let keys: KeyDirectory
    /// Per-key token buckets; a key over its rate gets 429.
    let keyLimiter: RateLimiter<SHA256Digest>
    let clock: any ServiceClock

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        if let key = Self.presentedKey(request.headers) {
            let digest = KeyRing.digest(key)
            let grant = keys.grant(ofDigest: digest)
            context.scope = grant?.scope
            context.allowedApps = grant?.apps
            context.keyId = grant?.id
            if context.scope != nil, keyLimiter.limit != nil {
                // Buckets are keyed by the key's digest, never by the key itself.
                let decision = keyLimiter.take(digest, now: clock.now)
                if !decision.allowed {
                    throw APIError.rateLimited(retryAfterSeconds: decision.retryAfterSeconds, limit: Int(keyLimiter.limit?.burst ?? 0))
                }
            }
        }
        return try await next(request, context)
    }

    /// The bearer token, or else the `X-SyncHealth-Key` value (trimmed), or `nil`.
    static func presentedKey(_ headers: HTTPFields) -> Substring? {
        if let header = headers.value(.authorization), let key = bearerToken(header) { return key }
        guard let name = keyHeader, let value = headers[name] else { return nil }
        let trimmed = value.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed()
        return trimmed.isEmpty ? nil : Substring(String(trimmed))
    }

    /// The token of an `Authorization: Bearer <token>` value (scheme case-insensitive, optional whitespace
    /// around the token trimmed), or `nil` for another scheme or an empty token. Works on the bytes: this runs
    /// for every request.
    static func bearerToken(_ header: String) -> Substring? {
        let utf8 = header.utf8
        var i = utf8.startIndex
        for expected in "bearer ".utf8 {
            guard i != utf8.endIndex, utf8[i] | (expected == 0x20 ? 0 : 0x20) == expected else { return nil }
            i = utf8.index(after: i)
        }
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
        var end = utf8.endIndex
        while i != end, isSpace(utf8[i]) { i = utf8.index(after: i) }
        while end != i, isSpace(utf8[utf8.index(before: end)]) { end = utf8.index(before: end) }
        guard i != end else { return nil }
        return header[i..<end]
    }
}

extension AppRequestContext {
    /// Throws 401 without a valid key, 403 when the key's scope does not grant `required`.
    func require(_ required: KeyScope) throws(APIError) {
        guard let scope else { throw .unauthorized }
        guard scope.grants(required) else { throw .forbidden(required: required) }
    }
}

extension AppRequestContext {
    /// Whether the key may see data of `appId`: a global key sees every app, a limited one its own; `nil` (data of
    /// no app, such as a fleet-wide alert) only a global key.
    func sees(appId: String?) -> Bool {
        guard let apps = allowedApps else { return true }
        return appId.map(apps.contains) ?? false
    }

    /// Whether every app of `appIds` is the key's: a limited key may not name none (that is every app).
    func covers(appIds: [String]?) -> Bool {
        guard let apps = allowedApps else { return true }
        guard let appIds, !appIds.isEmpty else { return false }
        return appIds.allSatisfy(apps.contains)
    }

    /// The app a listing or summary is narrowed to: the one asked for, which must be the key's, else the key's only
    /// app. A key limited to several apps names one; a global key may ask for none (every app).
    func app(narrowing requested: String?) throws(APIError) -> String? {
        guard let apps = allowedApps else { return requested }
        if let requested {
            guard apps.contains(requested) else { throw .outOfScope("This key is limited to other apps than \(requested).") }
            return requested
        }
        if apps.count == 1, let only = apps.first { return only }
        throw .invalidQuery(name: "appId", detail: "is required: this key is limited to \(apps.count) apps; name one of them")
    }

    /// Throws 403 unless the key is for every app (backups, the audit log, other scopes' keys).
    func requireGlobal() throws(APIError) {
        guard allowedApps == nil else { throw .outOfScope("This needs a key for every app.") }
    }

    /// The caller's address as the service saw it, for the audit log.
    var address: String { channel.remoteAddress?.ipAddress ?? "unknown" }
}
