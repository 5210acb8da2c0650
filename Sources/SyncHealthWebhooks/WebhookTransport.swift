/// One outbound webhook request.
public struct WebhookRequest: Sendable {
    /// The receiver's URL (http or https).
    public var url: String
    /// Headers to send.
    public var headers: [(name: String, value: String)]
    /// The body.
    public var body: [UInt8]
    /// If set, connect to this IP address (the one the SSRF guard checked) instead of resolving the host again.
    public var pinnedAddress: String?

    /// Creates a request.
    public init(url: String, headers: [(name: String, value: String)], body: [UInt8], pinnedAddress: String? = nil) {
        self.url = url
        self.headers = headers
        self.body = body
        self.pinnedAddress = pinnedAddress
    }
}

/// What came back.
public enum WebhookResponse: Sendable, Equatable {
    /// An HTTP answer, with its `Retry-After` header if any.
    case status(Int, retryAfter: String?)
    /// No HTTP answer: connection refused, timeout, TLS failure, ...
    case failure(String)
}

/// Sends webhook requests. The production transport is libcurl; tests may use a fake.
public protocol WebhookTransport: Sendable {
    /// Sends one request; never throws, never follows redirects.
    func send(_ request: WebhookRequest) async -> WebhookResponse
}
