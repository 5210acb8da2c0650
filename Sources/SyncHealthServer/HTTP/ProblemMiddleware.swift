import Hummingbird
import Logging
import SyncHealthEngine

/// Turns every error into problem+json: `APIError` with its own status, `EngineError` as its API error, Hummingbird's `HTTPResponseError`s with their
/// status, anything else into a bare 500 that is logged.
struct ProblemMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    /// The API's paths, for `405 Allow`.
    let paths: KnownPaths

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return error.problem.response(extraHeaders: error.headers)
        } catch let error as EngineError {
            let error = error.apiError
            return error.problem.response(extraHeaders: error.headers)
        } catch let error as any HTTPResponseError {
            // Hummingbird's own errors (HTTPError, NIOTooManyBytesError for bodies over the limit, ...).
            switch error.status {
            case .contentTooLarge:
                return APIError.bodyTooLarge(limit: IngestBody.maxBodySize).problem.response()
            case .notFound, .methodNotAllowed:
                // The router found no route for this method: a known path answers 405 with Allow.
                let error: APIError = paths.allowedMethods(request.uri.path).map { .methodNotAllowed(allow: $0) } ?? .routeNotFound
                return error.problem.response(extraHeaders: error.headers)
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

/// The API's paths and the methods each takes, for 405 answers; built from the route table.
struct KnownPaths: Sendable {
    /// Path segments (`*` for a parameter) and the methods, comma-separated.
    let table: [(segments: [String], methods: String)]

    init(_ routes: [APIRoute]) {
        var table: [(segments: [String], methods: [String])] = []
        for route in routes {
            let segments = route.path.split(separator: "/").map { $0.hasPrefix(":") ? "*" : String($0) }
            if let i = table.firstIndex(where: { $0.segments == segments }) {
                table[i].methods.append(route.method.rawValue)
            } else {
                table.append((segments, [route.method.rawValue]))
            }
        }
        self.table = table.map { ($0.segments, $0.methods.joined(separator: ", ")) }
    }

    /// The methods a path takes, or `nil` if the API has no such path.
    func allowedMethods(_ path: String) -> String? {
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        return table.first { entry in
            entry.segments.count == segments.count && zip(entry.segments, segments).allSatisfy { $0 == "*" || $0 == $1 }
        }?.methods
    }
}
