import CCurl
public import NIOPosix

/// Sends webhooks with libcurl. Each blocking `curl_easy_perform` runs on a thread pool of its own (`sendingPool`),
/// never on the Swift concurrency pool or an event loop, nor on NIO's shared blocking pool (as many threads as
/// cores), where two receivers that do not answer would hold every thread for the whole timeout.
///
/// Redirects are not followed (a 3xx is an answer like any other), only http and https are allowed, the
/// connect timeout is 5 s and the total timeout 15 s.
public struct CurlTransport: WebhookTransport {
    /// Connect timeout.
    public var connectTimeout: Duration
    /// Total timeout.
    public var totalTimeout: Duration
    let threadPool: NIOThreadPool

    /// Creates the transport.
    public init(connectTimeout: Duration = .seconds(5), totalTimeout: Duration = .seconds(15), threadPool: NIOThreadPool = Self.sendingPool) {
        _ = Self.globalInit
        self.connectTimeout = connectTimeout
        self.totalTimeout = totalTimeout
        self.threadPool = threadPool
    }

    /// Threads in `sendingPool`: as many as the webhook sender sends at once by default.
    public static let sendingThreads = 8

    /// The process's threads for sending, started once and kept for the process's life, like NIO's own singleton
    /// pool.
    public static let sendingPool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: sendingThreads)
        pool.start()
        return pool
    }()

    /// `curl_global_init`, once per process.
    static let globalInit: CURLcode = ccurl_global_init()

    public func send(_ request: WebhookRequest) async -> WebhookResponse {
        do {
            return try await threadPool.runIfActive { perform(request) }
        } catch {
            return .failure("the thread pool is shut down")
        }
    }

    func perform(_ request: WebhookRequest) -> WebhookResponse {
        guard let handle = curl_easy_init() else { return .failure("curl_easy_init failed") }
        defer { curl_easy_cleanup(handle) }
        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headerList) }
        var resolveList: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(resolveList) }

        var rc = ccurl_setopt_string(handle, CURLOPT_URL, request.url)
        func set(_ option: CURLoption, _ value: Int) { if rc == CURLE_OK { rc = ccurl_setopt_long(handle, option, value) } }
        rc = rc == CURLE_OK ? ccurl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https") : rc
        set(CURLOPT_FOLLOWLOCATION, 0)
        set(CURLOPT_NOSIGNAL, 1)
        set(CURLOPT_CONNECTTIMEOUT_MS, Int(connectTimeout.components.seconds * 1000))
        set(CURLOPT_TIMEOUT_MS, Int(totalTimeout.components.seconds * 1000))
        set(CURLOPT_POST, 1)
        for header in request.headers {
            headerList = curl_slist_append(headerList, "\(header.name): \(header.value)")
        }
        headerList = curl_slist_append(headerList, "Expect:")
        if rc == CURLE_OK { rc = ccurl_setopt_slist(handle, CURLOPT_HTTPHEADER, headerList) }
        if let address = request.pinnedAddress, let target = PinTarget(url: request.url) {
            let entry = address.contains(":") ? "[\(address)]" : address
            resolveList = curl_slist_append(resolveList, "\(target.host):\(target.port):\(entry)")
            if rc == CURLE_OK { rc = ccurl_setopt_slist(handle, CURLOPT_RESOLVE, resolveList) }
        }
        var response = ccurl_response()
        response.max_body = 64 * 1024
        return request.body.withUnsafeBufferPointer { body in
            body.baseAddress.map { base in
                base.withMemoryRebound(to: CChar.self, capacity: body.count) { chars in
                    if rc == CURLE_OK { rc = ccurl_setopt_postfields(handle, chars, body.count) }
                }
            }
            if rc == CURLE_OK && body.isEmpty { rc = ccurl_setopt_postfields(handle, "", 0) }
            guard rc == CURLE_OK else { return .failure(String(cString: curl_easy_strerror(rc))) }
            rc = withUnsafeMutablePointer(to: &response) { pointer in
                let capture = ccurl_capture_response(handle, pointer)
                return capture == CURLE_OK ? curl_easy_perform(handle) : capture
            }
            // Stopping after max_body bytes is not a failure: the status line and headers arrived.
            guard rc == CURLE_OK || rc == CURLE_WRITE_ERROR else { return .failure(String(cString: curl_easy_strerror(rc))) }
            var status = 0
            _ = ccurl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
            let retryAfter = withUnsafeBytes(of: response.retry_after) { raw -> String? in
                let bytes = raw.prefix { $0 != 0 }
                return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
            }
            return .status(status, retryAfter: retryAfter)
        }
    }
}

/// The host and port of a URL, for CURLOPT_RESOLVE.
struct PinTarget {
    var host: String
    var port: Int

    init?(url: String) {
        guard let parsed = WebhookURL(url) else { return nil }
        host = parsed.host
        port = parsed.port
    }
}
