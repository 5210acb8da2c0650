import Hummingbird

/// Reads `Authorization: Bearer <key>` and records the key's scope in the context. Routes then require a
/// scope with `context.require(_:)`. Keys are never logged.
struct AuthMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let keys: KeyRing
    /// Per-key token buckets; a key over its rate gets 429.
    let keyLimiter: RateLimiter
    let clock: any ServiceClock

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        if let header = request.headers[.authorization], header.count > 7, header.prefix(7).lowercased() == "bearer " {
            let key = header.dropFirst(7).trimmingCharacters(in: .whitespaces)
            context.scope = keys.scope(of: key)
            if context.scope != nil, keyLimiter.limit != nil {
                // Buckets are keyed by the key's digest, never by the key itself.
                let decision = keyLimiter.take(KeyRing.digest(key).prefix(16).map { String($0, radix: 16) }.joined(), now: clock.now)
                if !decision.allowed {
                    throw APIError.rateLimited(retryAfterSeconds: decision.retryAfterSeconds, limit: Int(keyLimiter.limit?.burst ?? 0))
                }
            }
        }
        return try await next(request, context)
    }
}

extension AppRequestContext {
    /// Throws 401 without a valid key, 403 when the key's scope does not grant `required`.
    func require(_ required: KeyScope) throws(APIError) {
        guard let scope else { throw .unauthorized }
        guard scope.grants(required) else { throw .forbidden(required: required) }
    }
}
