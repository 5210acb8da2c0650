import Testing

@testable import SyncHealthWebhooks

@Suite("Standard Webhooks signing")
struct WebhookSignerTests {
    @Test("matches the Standard Webhooks reference vector")
    func referenceVector() throws {
        // From the Standard Webhooks specification's examples.
        let signer = try #require(WebhookSigner(secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
        let body = Array(#"{"test": 2432232314}"#.utf8)
        #expect(
            signer.signature(id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: body)
                == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        )
    }

    @Test("verification accepts its own signature and refuses any change")
    func verify() throws {
        let secret = WebhookSigner.makeSecret()
        #expect(secret.hasPrefix("whsec_"))
        let signer = try #require(WebhookSigner(secret: secret))
        let body = Array("{}".utf8)
        let header = signer.signature(id: "msg_1", timestamp: 10, body: body)
        #expect(signer.verify(id: "msg_1", timestamp: 10, body: body, signatureHeader: header))
        #expect(signer.verify(id: "msg_1", timestamp: 10, body: body, signatureHeader: "v1,bogus " + header), "any listed signature")
        #expect(!signer.verify(id: "msg_2", timestamp: 10, body: body, signatureHeader: header))
        #expect(!signer.verify(id: "msg_1", timestamp: 11, body: body, signatureHeader: header))
        #expect(!signer.verify(id: "msg_1", timestamp: 10, body: Array("{ }".utf8), signatureHeader: header))
        let other = try #require(WebhookSigner(secret: WebhookSigner.makeSecret()))
        #expect(!other.verify(id: "msg_1", timestamp: 10, body: body, signatureHeader: header))
    }

    @Test("the headers are the three Standard Webhooks headers")
    func headers() throws {
        let signer = try #require(WebhookSigner(secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
        let names = signer.headers(id: "msg_1", timestamp: 5, body: []).map(\.name)
        #expect(names == ["content-type", "webhook-id", "webhook-timestamp", "webhook-signature"])
    }

    @Test("malformed secrets are refused", arguments: ["", "whsec_", "secret", "whsec_%%%"])
    func malformed(secret: String) {
        #expect(WebhookSigner(secret: secret) == nil)
    }
}

@Suite("SSRF guard")
struct AddressGuardTests {
    static func address(_ text: String) -> AddressGuard.Address? { AddressGuard.resolve(text).first }

    @Test(
        "non-public addresses are refused",
        arguments: [
            "127.0.0.1", "127.9.9.9", "10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1",
            "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255",
            "::1", "::", "fe80::1", "fd00:ec2::254", "fc00::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "ff02::1",
            // The red team's forms of loopback and private addresses: SIIT, 6to4, Teredo; and NAT64, documentation, discard.
            "::ffff:0:7f00:1", "::ffff:0:a00:1", "2002:7f00:1::", "2002:a9fe:a9fe::1", "2002:c0a8:101::", "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001::1", "64:ff9b:1::a00:1", "2001:db8::1", "100::1",
        ]
    )
    func nonPublic(text: String) throws {
        let a = try #require(Self.address(text))
        #expect(!AddressGuard.isPublic(a), "\(text)")
    }

    @Test(
        "public addresses pass",
        arguments: [
            "8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2001:4860:4860::8888", "::ffff:8.8.8.8", "::ffff:0:808:808", "2002:808:808::1",
        ]
    )
    func publicAddresses(text: String) throws {
        let a = try #require(Self.address(text))
        #expect(AddressGuard.isPublic(a), "\(text)")
    }

    @Test("URLs to private hosts are refused unless private targets are allowed")
    func check() throws {
        let strict = AddressGuard(allowPrivate: false)
        for url in [
            "http://127.0.0.1/x", "http://localhost:8080/x", "http://[::1]/x", "http://169.254.169.254/latest/meta-data", "https://10.1.2.3/x",
        ] {
            #expect(throws: AddressGuard.Refusal.self, "\(url)") { try strict.check(url) }
        }
        for url in ["ftp://example.com/x", "http://user:pw@example.com/x", "not a url", "http:///x", "file:///etc/passwd"] {
            #expect(throws: AddressGuard.Refusal.invalidURL, "\(url)") { try strict.check(url) }
        }
        let open = AddressGuard(allowPrivate: true)
        let allowed = try open.check("http://127.0.0.1:9/hook")
        #expect(allowed.address == "127.0.0.1")
        #expect(allowed.url.port == 9)
        #expect(try open.check("https://localhost/x").url.port == 443)
    }
}
