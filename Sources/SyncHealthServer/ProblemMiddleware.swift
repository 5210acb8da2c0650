import Hummingbird
import Logging

/// Turns every error into problem+json: `APIError` with its own status, Hummingbird's `HTTPResponseError`s with their
/// status, anything else into a bare 500 that is logged.
struct ProblemMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return error.problem.response(extraHeaders: error.headers)
        } catch let error as any HTTPResponseError {
            // Hummingbird's own errors (HTTPError, NIOTooManyBytesError for bodies over the limit, ...).
            switch error.status {
            case .contentTooLarge:
                return APIError.bodyTooLarge(limit: EventsRoutes.maxBodySize).problem.response()
            case .notFound:
                return APIError.routeNotFound.problem.response()
            case .methodNotAllowed:
                return APIError.methodNotAllowed.problem.response()
            default:
                let detail = (error as? HTTPError)?.body ?? error.status.reasonPhrase
                return Problem(slug: "http", title: error.status.reasonPhrase, status: error.status, detail: detail).response()
            }
        } catch {
            context.logger.error("Unhandled error", metadata: ["error": "\(String(reflecting: error))", "http.path": "\(request.uri.path)"])
            return Problem.internalError.response()
        }
    }
}
