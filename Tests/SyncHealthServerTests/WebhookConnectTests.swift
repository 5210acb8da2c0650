import Foundation
import NIOCore
import SyncHealthEngineTesting
import SyncHealthTestSupport
import SyncHealthWebhooks
import Testing

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

    @Test("http_proxy, HTTPS_PROXY and ALL_PROXY in the service's environment are not used for deliveries")
    func environmentProxiesIgnored() async throws {
        let receiver = TestReceiver()
        let proxy = TestReceiver()
        try await withReceiver(receiver) { port in
            try await withReceiver(proxy) { proxyPort in
                // Set in the server's environment only: set in this process, they would send every other test's
                // requests (URLSession here is libcurl too) to the stand-in proxy.
                var environment = [
                    "SYNCHEALTH_INGEST_KEYS": "ingest-0123456789abcdefghijklmnop", "SYNCHEALTH_ADMIN_KEYS": "admin-0123456789abcdefghijklmnop",
                    "SYNCHEALTH_WEBHOOK_ALLOW_PRIVATE": "1",
                ]
                for name in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"] {
                    environment[name] = "http://127.0.0.1:\(proxyPort)"
                }
                let server = try LiveServer(environment: environment)
                defer { server.stop() }
                // Subscriptions are refused (503) until the engine has loaded them: the port opens before that.
                try await server.waitUntilReady()
                let hook = #"{"url": "http://localhost:\#(port)/hook", "grouping": "device"}"#
                #expect(
                    try await server.request("POST", "/v1/webhooks", key: "admin-0123456789abcdefghijklmnop", body: Data(hook.utf8)).status == 201
                )
                let broken = String(
                    buffer: batch([event("n", #""kind": "network", "available": true"#), event("f", "2026-11-22T10:00:01Z", urgentError)])
                )
                #expect(
                    try await server.request("POST", "/v1/events", key: "ingest-0123456789abcdefghijklmnop", body: Data(broken.utf8)).status == 202
                )
                #expect(try await eventually { receiver.count >= 1 }, "delivered straight to the receiver")
                #expect(proxy.count == 0, "the environment's proxy was used")
            }
        }
    }

    @Test("a proxy named by the setting gets the deliveries")
    func configuredProxy() async throws {
        let receiver = TestReceiver()
        let proxy = TestReceiver()
        try await withReceiver(receiver) { port in
            try await withReceiver(proxy) { proxyPort in
                // The stand-in proxy answers as a receiver would.
                let request = WebhookRequest(url: "http://localhost:\(port)/hook", headers: [], body: [], pinnedAddress: "127.0.0.1")
                _ = await CurlTransport(totalTimeout: .seconds(5), proxy: "http://127.0.0.1:\(proxyPort)").send(request)
                #expect(proxy.count == 1 && receiver.count == 0)
            }
        }
    }
}
