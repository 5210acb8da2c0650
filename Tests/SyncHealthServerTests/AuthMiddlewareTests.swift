import SyncHealthTestSupport
import Testing
@testable import SyncHealthServer
import SyncHealthEngine

@Suite("Authorization header")
struct AuthMiddlewareTests {
    @Test("a Bearer token is read whatever the scheme's case, with spaces and tabs around it trimmed",
          arguments: [("Bearer abc", "abc"), ("bearer abc", "abc"), ("BEARER abc", "abc"), ("bEaReR abc", "abc"),
                      ("Bearer   abc \t ", "abc"), ("Bearer \tk-1.2_3", "k-1.2_3"), ("Bearer a b", "a b")])
    func bearerToken(header: String, token: String) {
        #expect(AuthMiddleware.bearerToken(header).map(String.init) == token)
    }

    @Test("another scheme, no space after the scheme, or an empty token is no token",
          arguments: ["Basic abc", "Bearer", "Bearer ", "Bearer  \t ", "Bearerabc", "Bearer\tabc", "Bearér abc", "", "Bear abc", "xBearer abc"])
    func notABearerToken(header: String) {
        #expect(AuthMiddleware.bearerToken(header) == nil)
    }

    @Test("a key's scope is found by its digest, and only the exact key matches")
    func scopeByDigest() {
        let ring = KeyRing(ingest: ["in-key"], read: ["read-key"], admin: ["admin-key"])
        #expect(ring.scope(of: "in-key") == .ingest)
        #expect(ring.scope(of: "read-key") == .read)
        #expect(ring.scope(of: "admin-key") == .admin)
        #expect(ring.scope(of: "in-key ") == nil)
        #expect(ring.scope(of: "in-ke") == nil)
        #expect(ring.scope(ofDigest: KeyRing.digest("read-key"[...])) == .read)
        #expect(ring.scope(ofDigest: []) == nil)
    }

    @Test("hex is two lowercase digits per byte")
    func hex() {
        #expect(KeyRing.hex([0x00, 0x0a, 0xff, 0x10]) == "000aff10")
        #expect(KeyRing.hex([UInt8]()) == "")
    }
}
