import Dispatch
import Hummingbird
import Metrics
import Synchronization

/// Records each request's count, duration and errors, under the same names and labels as Hummingbird's
/// `MetricsMiddleware`: `hb.requests`, `http.server.request.duration`, `hb.request.errors` (by route, method and
/// status) and `http.server.active_requests` (by method).
///
/// It differs from Hummingbird's in two ways:
/// - It runs outside `ProblemMiddleware`, so it sees every answer with its real status: a 401 is recorded as a
///   401 (Hummingbird's saw the `APIError` and recorded a 500), and an error's duration is recorded too. A
///   request that no route matched is recorded under the route `NotFound`.
/// - It records when the handler returns instead of after the body is written. The response keeps its
///   single-buffer body, and Hummingbird then writes head, body and end in one flush, one `write(2)`; a body
///   wrapped in a closure, as Hummingbird's middleware does, costs a flush per part. Every body here is one
///   buffer, so the time left out is that of handing it to the channel.
struct RequestMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let cache = RequestMetricsCache()

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = DispatchTime.now().uptimeNanoseconds
        let method = RequestMetricsCache.label(request.method)
        let active = cache.active(method)
        active.increment()
        defer { active.decrement() }
        let response: Response
        do {
            response = try await next(request, context)
        } catch {
            // Only if something outside ProblemMiddleware throws.
            record(method, context, status: (error as? any HTTPResponseError)?.status ?? .internalServerError, since: started)
            throw error
        }
        record(method, context, status: response.status, since: started)
        return response
    }

    private func record(_ method: String, _ context: Context, status: HTTPResponse.Status, since started: UInt64) {
        let metrics = cache.endpoint(.init(route: context.endpointPath ?? "NotFound", method: method, status: status))
        metrics.requests.increment()
        metrics.duration.recordNanoseconds(DispatchTime.now().uptimeNanoseconds - started)
        if status.code >= 400 { metrics.errors.increment() }
    }
}

/// The metric objects of each route, method and status, created on first use. Routes are the router's (or
/// `NotFound`), methods the standard ones (or `_OTHER`), statuses the server's own: the set is bounded.
final class RequestMetricsCache: Sendable {
    struct Key: Hashable {
        var route: String
        var method: String
        var status: HTTPResponse.Status
    }

    /// The HTTP parser lets some thirty methods through (WebDAV's among them); any but the standard ones is
    /// counted as `_OTHER` (OpenTelemetry's name), so clients choose no label values.
    static func label(_ method: HTTPRequest.Method) -> String {
        switch method {
        case .get, .head, .post, .put, .delete, .connect, .options, .trace, .patch: method.rawValue
        default: "_OTHER"
        }
    }

    struct Endpoint: Sendable {
        let requests: Counter
        let duration: Timer
        let errors: Counter

        init(_ key: Key) {
            let labels = [
                ("http.route", key.route), ("http.request.method", key.method),
                ("http.response.status_code", key.status.code.description),
            ]
            requests = Counter(label: "hb.requests", dimensions: labels)
            duration = Timer(label: "http.server.request.duration", dimensions: labels, preferredDisplayUnit: .seconds)
            errors = Counter(label: "hb.request.errors", dimensions: [labels[0], labels[1], ("error.type", key.status.code.description)])
        }
    }

    private let endpoints = Mutex<[Key: Endpoint]>([:])
    private let actives = Mutex<[String: Meter]>([:])

    func endpoint(_ key: Key) -> Endpoint {
        endpoints.withLock { map in
            if let found = map[key] { return found }
            let made = Endpoint(key)
            map[key] = made
            return made
        }
    }

    func active(_ method: String) -> Meter {
        actives.withLock { map in
            if let found = map[method] { return found }
            let made = Meter(label: "http.server.active_requests", dimensions: [("http.request.method", method)])
            map[method] = made
            return made
        }
    }
}
