import HTTPTypes
import HummingbirdTesting
import SyncHealthEngine
import SyncHealthTestSupport
import Testing

@testable import SyncHealthServer

@Suite("Authorization header")
struct AuthMiddlewareTests {
    @Test(
        "a Bearer token is read whatever the scheme's case, with spaces and tabs around it trimmed",
        arguments: [
            ("Bearer abc", "abc"), ("bearer abc", "abc"), ("BEARER abc", "abc"), ("bEaReR abc", "abc"),
            ("Bearer   abc \t ", "abc"), ("Bearer \tk-1.2_3", "k-1.2_3"), ("Bearer a b", "a b"),
        ]
    )
    func bearerToken(header: String, token: String) {
        #expect(AuthMiddleware.bearerToken(header).map(String.init) == token)
    }

    @Test(
        "another scheme, no space after the scheme, or an empty token is no token",
        arguments: ["Basic abc", "Bearer", "Bearer ", "Bearer  \t ", "Bearerabc", "Bearer\tabc", "Bearér abc", "", "Bear abc", "xBearer abc"]
    )
    func notABearerToken(header: String) {
        #expect(AuthMiddleware.bearerToken(header) == nil)
    }

    @Test(
        "a header's value is the subscript's: nil when absent, the one value, or every value joined",
        arguments: [[], ["Bearer a"], ["Bearer a", "Bearer b"], ["", "x"]] as [[String]]
    )
    func headerValue(values: [String]) {
        var fields = HTTPFields()
        fields[.accept] = "*/*"
        for value in values { fields.append(HTTPField(name: .authorization, value: value)) }
        fields[.userAgent] = "test"
        #expect(fields.value(.authorization) == fields[.authorization])
        #expect(fields.value(.authorization) == (values.isEmpty ? nil : values.joined(separator: ", ")))
        fields.append(HTTPField(name: .cookie, value: "a=1"))
        fields.append(HTTPField(name: .cookie, value: "b=2"))
        #expect(fields.value(.cookie) == "a=1; b=2")
    }

    @Test("a key's scope is found by its digest, and only the exact key matches")
    func scopeByDigest() {
        let ring = KeyRing(ingest: ["in-key"], read: ["read-key"], admin: ["admin-key"])
        #expect(ring.scope(of: "in-key") == .ingest)
        #expect(ring.scope(of: "read-key") == .read)
        #expect(ring.scope(of: "admin-key") == .admin)
        #expect(ring.scope(of: "in-key ") == nil)
        #expect(ring.scope(of: "in-ke") == nil)
        #expect(ring.grant(ofDigest: KeyRing.digest("read-key"[...]))?.scope == .read)
        #expect(ring.grant(ofDigest: KeyRing.digest("unknown")) == nil)
        #expect(KeyRing.digest("Bearer read-key".dropFirst(7)) == KeyRing.digest("read-key"), "a substring hashes as its string")
    }

    @Test("an ingest key bound with KEY@appId may post for its apps only; the same key listed bare may post for any")
    func boundIngestKeys() {
        let ring = KeyRing(ingest: ["k1@com.a", "k1@com.b", "k2", "k3@com.c", "k3", "we@ird@com.d"], read: [], admin: [])
        #expect(
            ring.grant(ofDigest: KeyRing.digest("k1")).map { KeyGrant(scope: $0.scope, apps: $0.apps) }
                == KeyGrant(scope: .ingest, apps: ["com.a", "com.b"])
        )
        #expect(ring.grant(ofDigest: KeyRing.digest("k2")).map { KeyGrant(scope: $0.scope, apps: $0.apps) } == KeyGrant(scope: .ingest, apps: nil))
        #expect(ring.grant(ofDigest: KeyRing.digest("k3")).map { KeyGrant(scope: $0.scope, apps: $0.apps) } == KeyGrant(scope: .ingest, apps: nil))
        #expect(
            ring.grant(ofDigest: KeyRing.digest("we@ird")).map { KeyGrant(scope: $0.scope, apps: $0.apps) }
                == KeyGrant(scope: .ingest, apps: ["com.d"]),
            "split at the last @"
        )
        #expect(ring.scope(of: "k1@com.a") == nil, "the entry is not itself a key")
        let id = ring.grant(ofDigest: KeyRing.digest("k1"))?.id ?? ""
        #expect(id.hasPrefix("env_") && id.count == 16 && id != ring.grant(ofDigest: KeyRing.digest("k2"))?.id, "a configured key's id: \(id)")
        #expect(KeyGrant(scope: .ingest, apps: ["com.a"]).allows(appId: "com.a"))
        #expect(!KeyGrant(scope: .ingest, apps: ["com.a"]).allows(appId: "com.b"))
    }

    @Test("X-SyncHealth-Key is read where there is no bearer token; a bearer token wins; blank is no key")
    func keyHeader() throws {
        let name = try #require(AuthMiddleware.keyHeader)
        var fields = HTTPFields()
        fields[name] = "  the-key  "
        #expect(AuthMiddleware.presentedKey(fields) == "the-key")
        fields[.authorization] = "Bearer other"
        #expect(AuthMiddleware.presentedKey(fields) == "other")
        var blank = HTTPFields()
        blank[name] = "   "
        #expect(AuthMiddleware.presentedKey(blank) == nil)
    }

    @Test("an ingest request with X-SyncHealth-Key alone is accepted, as the client sends it")
    func keyHeaderThroughTheRouter() async throws {
        try await TestService().test { client in
            let name = try #require(AuthMiddleware.keyHeader)
            var fields = HTTPFields()
            fields[name] = ingestKey
            fields[.contentType] = "application/json"
            let response = try await client.execute(uri: "/v1/events", method: .post, headers: fields, body: batch(healthyEvents))
            #expect(response.status == .accepted)
        }
    }
}
