import Foundation
import SyncHealthEngineTesting
import SyncHealthWebhooks
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// libcurl connects only where the SSRF guard checked: the pin holds for internationalised hosts, a socket to
/// another address is never opened, and the environment's proxies are not used.
@Suite("Webhook delivery connects only where the guard checked", .serialized)
struct WebhookConnectTests {
    @Test("an IDN host is parsed as libcurl parses it, in its ASCII form, and the URL sent is that form")
    func idnHost() throws {
        let url = try #require(WebhookURL("https://bücher.test:8443/hook?x=1"))
        #expect(url.host == "xn--bcher-kva.test")
        #expect(url.port == 8443)
        #expect(url.text == "https://xn--bcher-kva.test:8443/hook?x=1")
        #expect(WebhookURL("http://BÜCHER.test/")?.host == "xn--bcher-kva.test")
        for refused in ["http:///x", "http://user@example.com/", "http://[fe80::1%25eth0]/", "http://exa mple.com/", "gopher://example.com/"] {
            #expect(WebhookURL(refused) == nil, "\(refused)")
        }
    }

    @Test("an IDN host pinned in its ASCII form reaches the pinned address (libcurl looks it up by that form)")
    func idnPinned() async throws {
        let receiver = TestReceiver()
        try await withReceiver(receiver) { port in
            // `bücher.test` resolves nowhere: only the pin can take it to the receiver.
            let request = WebhookRequest(url: "http://bücher.test:\(port)/hook", headers: [], body: Array("{}".utf8), pinnedAddress: "127.0.0.1")
            let response = await CurlTransport(totalTimeout: .seconds(5)).send(request)
            #expect(response == .status(204, retryAfter: nil), "\(response)")
            #expect(receiver.count == 1)
        }
    }

    @Test("a socket to any address but the pinned one is refused before it opens")
    func socketPinned() async throws {
        let receiver = TestReceiver()
        try await withReceiver(receiver) { port in
            // The URL names ::1, an IP literal that libcurl connects to without a look-up (so the host's pin does
            // not apply); the guard checked 127.0.0.1.
            let request = WebhookRequest(url: "http://[::1]:\(port)/hook", headers: [], body: [], pinnedAddress: "127.0.0.1")
            let response = await CurlTransport(totalTimeout: .seconds(5)).send(request)
            guard case .failure(let reason) = response else {
                Issue.record("connected: \(response)")
                return
            }
            #expect(reason.contains("refused to connect to an address other than the checked 127.0.0.1"))
            #expect(receiver.count == 0)
        }
    }

    @Test("http_proxy, HTTPS_PROXY and ALL_PROXY in the environment are not used; a configured proxy is")
    func proxies() async throws {
        let receiver = TestReceiver()
        let proxy = TestReceiver()
        try await withReceiver(receiver) { port in
            try await withReceiver(proxy) { proxyPort in
                let names = ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"]
                for name in names { setenv(name, "http://127.0.0.1:\(proxyPort)", 1) }
                defer { for name in names { unsetenv(name) } }
                let request = WebhookRequest(url: "http://localhost:\(port)/hook", headers: [], body: [], pinnedAddress: "127.0.0.1")
                let direct = await CurlTransport(totalTimeout: .seconds(5)).send(request)
                #expect(direct == .status(204, retryAfter: nil), "\(direct)")
                #expect(receiver.count == 1 && proxy.count == 0, "the environment's proxy was used")

                // A proxy named by the setting gets the request (the test proxy answers as a receiver would).
                let viaProxy = WebhookRequest(url: "http://localhost:\(port)/hook", headers: [], body: [], pinnedAddress: "127.0.0.1")
                _ = await CurlTransport(totalTimeout: .seconds(5), proxy: "http://127.0.0.1:\(proxyPort)").send(viaProxy)
                #expect(proxy.count == 1 && receiver.count == 1)
            }
        }
    }
}
