import Hummingbird
import Logging

/// Turns every error into problem+json: `APIError` with its own status, Hummingbird's `HTTPError` with its
/// status, anything else into a bare 500 that is logged.
struct ProblemMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return error.problem.response(extraHeaders: error.headers)
        } catch let error as HTTPError {
            switch error.status {
            case .contentTooLarge:
                return APIError.bodyTooLarge(limit: EventsRoutes.maxBodySize).problem.response()
            case .notFound:
                return APIError.routeNotFound.problem.response()
            case .methodNotAllowed:
                return APIError.methodNotAllowed.problem.response()
            default:
                let problem = Problem(slug: "http", title: error.status.reasonPhrase, status: error.status, detail: error.body ?? error.status.reasonPhrase)
                return problem.response(extraHeaders: error.headers)
            }
        } catch {
            context.logger.error("Unhandled error", metadata: ["error": "\(String(reflecting: error))", "http.path": "\(request.uri.path)"])
            return Problem.internalError.response()
        }
    }
}
