import Hummingbird

/// Reads `Authorization: Bearer <key>` and records the key's scope in the context. Routes then require a
/// scope with `context.require(_:)`. Keys are never logged.
struct AuthMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let keys: KeyRing

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        if let header = request.headers[.authorization], header.count > 7, header.prefix(7).lowercased() == "bearer " {
            let key = header.dropFirst(7).trimmingCharacters(in: .whitespaces)
            context.scope = keys.scope(of: key)
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
