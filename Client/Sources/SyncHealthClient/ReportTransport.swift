public import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends one HTTP request. The reporter uses `URLSessionTransport`; tests put a stand-in server here.
public protocol ReportTransport: Sendable {
    /// Posts `body` to `url` and returns the answer; throws only when no answer came (network, timeout).
    func post(_ body: Data, to url: URL, headers: [String: String]) async throws -> TransportResponse
}

/// An HTTP answer.
public struct TransportResponse: Sendable {
    /// The status code.
    public var status: Int
    /// The headers.
    public var headers: [String: String]
    /// The body.
    public var body: Data

    /// Creates an answer.
    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// `URLSession`, with an ephemeral configuration (no cookies, no cache) and a 30-second timeout.
public struct URLSessionTransport: ReportTransport {
    /// One session for every reporter, made at the first send: a session has threads and timers of its own,
    /// which a reporter that never sends (or sends through another transport) should not start.
    private static let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 30
        configuration.timeoutIntervalForResource = 60
        configuration.httpCookieAcceptPolicy = .never
        configuration.urlCache = nil
        return URLSession(configuration: configuration)
    }()

    private let ownSession: URLSession?

    /// A transport over the shared ephemeral session.
    public init() {
        ownSession = nil
    }

    /// A transport over a session of its own with shorter timeouts (tests of answers that never come).
    init(requestTimeout: TimeInterval) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = requestTimeout
        configuration.timeoutIntervalForResource = requestTimeout * 2
        configuration.httpCookieAcceptPolicy = .never
        configuration.urlCache = nil
        ownSession = URLSession(configuration: configuration)
    }

    public func post(_ body: Data, to url: URL, headers: [String: String]) async throws -> TransportResponse {
        let session = ownSession ?? Self.session
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.httpBody = body
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { fields[name] = value }
        }
        return TransportResponse(status: http.statusCode, headers: fields, body: data)
    }
}
