import CCurl
public import NIOPosix
import SyncHealthBuildInfo

/// Sends webhooks with libcurl. Each blocking `curl_easy_perform` runs on a thread pool of its own (`sendingPool`),
/// never on the Swift concurrency pool or an event loop, nor on NIO's shared blocking pool (as many threads as
/// cores), where two receivers that do not answer would hold every thread for the whole timeout.
///
/// Deliveries carry `User-Agent: SyncHealth/<version>`. Redirects are not followed (a 3xx is an answer like any other), only http and https are allowed, the
/// connect timeout is 5 s and the total timeout 15 s.
///
/// A request with a `pinnedAddress` connects to that address only: the host is pinned to it (`CURLOPT_RESOLVE`),
/// and a socket to any other address is refused before it opens, so a second resolution by libcurl cannot reach
/// an address the SSRF guard never checked. The proxy variables of the environment (`http_proxy`, `HTTPS_PROXY`,
/// `ALL_PROXY`) are ignored: deliveries go through a proxy only when `proxy` names one, and then the proxy
/// resolves the host.
public struct CurlTransport: WebhookTransport {
    /// Connect timeout.
    public var connectTimeout: Duration
    /// Total timeout.
    public var totalTimeout: Duration
    /// The proxy every delivery goes through (`SYNCHEALTH_WEBHOOK_PROXY`), or `nil` for none.
    public var proxy: String?
    let threadPool: NIOThreadPool

    /// Creates the transport.
    public init(
        connectTimeout: Duration = .seconds(5),
        totalTimeout: Duration = .seconds(15),
        proxy: String? = nil,
        threadPool: NIOThreadPool = Self.sendingPool
    ) {
        _ = Self.globalInit
        self.connectTimeout = connectTimeout
        self.totalTimeout = totalTimeout
        self.proxy = proxy
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

        // The URL as libcurl parses it, its host already in ASCII: what the pin names is what libcurl looks up.
        guard let target = WebhookURL(request.url) else { return .failure("the URL cannot be used") }
        var rc = ccurl_setopt_string(handle, CURLOPT_URL, target.text)
        func set(_ option: CURLoption, _ value: Int) { if rc == CURLE_OK { rc = ccurl_setopt_long(handle, option, value) } }
        rc = rc == CURLE_OK ? ccurl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https") : rc
        // Receivers see which release sends (a receiver's logs name the sender when an upgrade changes a body).
        rc = rc == CURLE_OK ? ccurl_setopt_string(handle, CURLOPT_USERAGENT, BuildInfo.userAgent) : rc
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
        // An empty proxy turns off the environment's proxy variables.
        if rc == CURLE_OK { rc = ccurl_setopt_string(handle, CURLOPT_PROXY, proxy ?? "") }
        // libcurl calls the socket check during `curl_easy_perform`: the pin lives at a fixed address until then.
        let pin = UnsafeMutablePointer<ccurl_pin>.allocate(capacity: 1)
        pin.initialize(to: ccurl_pin())
        defer { pin.deallocate() }
        if proxy == nil, let address = request.pinnedAddress {
            guard ccurl_pin_init(pin, address) == 0 else { return .failure("the pinned address \(address) cannot be used") }
            // An IPv6 literal is connected to without a look-up (and cannot be written as a pin's host): the socket
            // check alone holds it to the address.
            if !target.host.contains(":") {
                let entry = address.contains(":") ? "[\(address)]" : address
                resolveList = curl_slist_append(resolveList, "\(target.host):\(target.port):\(entry)")
                if rc == CURLE_OK { rc = ccurl_setopt_slist(handle, CURLOPT_RESOLVE, resolveList) }
            }
            if rc == CURLE_OK { rc = ccurl_pin_sockets(handle, pin) }
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
            if pin.pointee.refused != 0 {
                return .failure("refused to connect to an address other than the checked \(request.pinnedAddress ?? "")")
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
