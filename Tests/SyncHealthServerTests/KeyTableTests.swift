import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import NIOCore
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthStore
import SyncHealthTestSupport
import Synchronization
import Testing

@testable import SyncHealthServer

/// An access store that counts the keys each read returns: what a replica pays for staying current.
private final class CountingAccessStore: AccessStore {
    let inner = InMemoryStore()
    let keysRead = Atomic<Int>(0)

    func keyChanges(after seq: Int64) async throws -> KeyChanges {
        let read = try await inner.keyChanges(after: seq)
        keysRead.add(read.changes.count, ordering: .relaxed)
        return read
    }
    func keys(after position: KeyPosition?, limit: Int) async throws -> [StoredKey] { try await inner.keys(after: position, limit: limit) }
    func insertKey(_ key: StoredKey) async throws { try await inner.insertKey(key) }
    func revokeKey(id: String, at: Timestamp) async throws -> Bool { try await inner.revokeKey(id: id, at: at) }
    func deleteKeys(ids: [String]) async throws -> Int { try await inner.deleteKeys(ids: ids) }
    func touchKeys(_ used: [String: Timestamp]) async throws { try await inner.touchKeys(used) }
    func appendAudit(_ entry: AuditEntry) async throws { try await inner.appendAudit(entry) }
    func auditEntries(before: Int64?, limit: Int) async throws -> [AuditEntry] { try await inner.auditEntries(before: before, limit: limit) }
    func pruneAudit(before cutoff: Timestamp, limit: Int) async throws -> Int { try await inner.pruneAudit(before: cutoff, limit: limit) }
}

/// A stored key whose secret is `"secret-" + id`.
private func stored(
    _ id: String,
    by maker: String = "environment",
    apps: [String]? = nil,
    expires: Timestamp? = nil,
    revoked: Timestamp? = nil
) -> StoredKey {
    StoredKey(
        id: id,
        role: "read",
        appIds: apps,
        description: "",
        secretDigest: Array(KeyRing.digest("secret-" + id)),
        createdAt: testStart,
        expiresAt: expires,
        revokedAt: revoked,
        createdBy: maker
    )
}

private func directory(_ store: any AccessStore, clock: ManualClock, retention: Duration? = .seconds(86_400)) -> KeyDirectory {
    KeyDirectory(configured: testKeys, store: store, clock: clock, auditRetention: retention, logger: Logger(label: "test"))
}

extension TestClientProtocol {
    fileprivate func make(_ body: String, key: String = adminKey) async throws -> TestResponse {
        try await execute(
            uri: "/v1/keys",
            method: .post,
            headers: headers(key, [.contentType: "application/json"]),
            body: ByteBuffer(string: body)
        )
    }

    /// Every page of `GET /v1/keys` at `limit`, and how many pages it took.
    fileprivate func allKeys(key: String, limit: Int) async throws -> (ids: [String], pages: Int) {
        var ids: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            let query = "limit=\(limit)" + (cursor.map { "&cursor=\($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" } ?? "")
            let response = try await get("/v1/keys?\(query)", key: key)
            #expect(response.status == .ok)
            let page = try json(response)
            let data = page["data"] as? [[String: Any]] ?? []
            ids += data.compactMap { $0["source"] as? String == "api" ? $0["id"] as? String : nil }
            cursor = page["nextCursor"] as? String
            pages += 1
        } while cursor != nil && pages < 100
        return (ids, pages)
    }
}

@Suite("The key table at scale: a cap per scope, pages, ended keys forgotten, replicas read what changed")
struct KeyTableTests {
    @Test("keys beyond the cap for an app, or for every app, are refused with 409 key-limit; revoked keys free their place")
    func cap() async throws {
        try await TestService(keyLimit: 3).test { client in
            let scoped = try json(try await client.make(#"{"role": "admin", "appIds": ["com.a"]}"#))["key"] as? String ?? ""
            var readKeys: [String] = []
            for _ in 0..<2 {
                let made = try await client.make(#"{"role": "read", "appIds": ["com.a"]}"#, key: scoped)
                #expect(made.status == .created)
                readKeys.append(try json(made)["id"] as? String ?? "")
            }
            let refused = try await client.make(#"{"role": "read", "appIds": ["com.a"]}"#, key: scoped)
            #expect(refused.status == .conflict)
            let problem = try json(refused)
            #expect((problem["type"] as? String)?.hasSuffix("key-limit") == true)
            #expect((problem["detail"] as? String)?.contains("SYNCHEALTH_KEY_LIMIT") == true)
            #expect(
                try await client.make(#"{"role": "read", "appIds": ["com.a", "com.b"]}"#).status == .conflict,
                "a key for several apps counts against each"
            )
            #expect(try await client.make(#"{"role": "read", "appIds": ["com.b"]}"#).status == .created, "another app has room")

            #expect(try await client.execute(uri: "/v1/keys/\(readKeys[0])", method: .delete, headers: headers(adminKey)).status == .noContent)
            #expect(try await client.make(#"{"role": "read", "appIds": ["com.a"]}"#, key: scoped).status == .created, "a revoked key frees its place")

            for _ in 0..<3 { #expect(try await client.make(#"{"role": "read"}"#).status == .created) }
            #expect(try await client.make(#"{"role": "read"}"#).status == .conflict, "keys for every app have a cap of their own")
        }
    }

    @Test("GET /v1/keys is paged oldest first; every key once; a key for one app pages through its own keys only; a bad cursor is 400")
    func pages() async throws {
        let service = TestService()
        try await service.test { client in
            let scoped = try json(try await client.make(#"{"role": "admin", "appIds": ["com.a"]}"#))["id"] as? String ?? ""
            service.clock.advance(by: .seconds(1))
            let scopedSecret = try await {
                let made = try json(try await client.make(#"{"role": "admin", "appIds": ["com.a"]}"#))
                return made["key"] as? String ?? ""
            }()
            var mine: [String] = []
            var all: [String] = []
            for index in 0..<7 {
                // Keys made in one microsecond are listed by id; a second apart, by age.
                service.clock.advance(by: .seconds(1))
                let app = index % 2 == 0 ? "com.a" : "com.b"
                let made = try json(try await client.make(#"{"role": "read", "appIds": ["\#(app)"]}"#))
                let id = made["id"] as? String ?? ""
                all.append(id)
                if app == "com.a" { mine.append(id) }
            }
            let everything = try await client.allKeys(key: adminKey, limit: 2)
            #expect(everything.ids.count == 9 && everything.ids.suffix(7) == all[...], "every key once, oldest first")
            #expect(everything.ids.first == scoped)
            #expect(everything.pages >= 5)

            let first = try json(try await client.get("/v1/keys?limit=2", key: adminKey))
            let sources = (first["data"] as? [[String: Any]] ?? []).map { $0["source"] as? String ?? "" }
            #expect(sources == ["environment", "environment", "environment", "api", "api"], "the configured keys lead the first page")

            let own = try await client.allKeys(key: scopedSecret, limit: 1)
            #expect(own.ids.count == 2 + mine.count && own.ids.suffix(mine.count) == mine[...], "another app's keys are skipped")
            #expect(try await client.get("/v1/keys?cursor=nonsense", key: adminKey).status == .badRequest)
            #expect(try await client.get("/v1/keys?cursor=12.a%20b", key: adminKey).status == .badRequest)
        }
    }

    @Test("keys that ended before the audit retention are forgotten with the keys they made, and none comes back; keys that end later stay")
    func pruning() async throws {
        let clock = ManualClock(testStart)
        let store = InMemoryStore()
        let day = Duration.seconds(86_400)
        for key in [
            stored("key_maker", revoked: testStart + .seconds(60)),
            stored("key_child", by: "key_maker"),
            stored("key_grandchild", by: "key_child"),
            stored("key_expired", expires: testStart + .seconds(3600)),
            stored("key_recent", revoked: testStart + day + .seconds(3600)),
            stored("key_live"),
            stored("key_later", expires: testStart + day * 10),
            stored("key_under_later", by: "key_later"),
        ] {
            try await store.insertKey(key)
        }
        clock.advance(by: day * 2)
        let keys = directory(store, clock: clock)
        let forgotten = try await withThrowingTaskGroup(of: Void.self) { group throws -> Bool in
            group.addTask { try await keys.run() }
            defer { group.cancelAll() }
            return try await eventually {
                try await store.keys(after: nil, limit: 100).map(\.id).sorted() == ["key_later", "key_live", "key_recent", "key_under_later"]
            }
        }
        #expect(forgotten, "the directory's loop forgets keys that ended more than a day ago")
        let fresh = directory(store, clock: clock)
        try await fresh.reload()
        #expect(fresh.grant(ofDigest: KeyRing.digest("secret-key_child")) == nil, "a key made by a forgotten key is forgotten, not revived")
        #expect(fresh.grant(ofDigest: KeyRing.digest("secret-key_grandchild")) == nil)
        #expect(fresh.grant(ofDigest: KeyRing.digest("secret-key_live")) != nil)
        #expect(fresh.grant(ofDigest: KeyRing.digest("secret-key_under_later")) != nil)
        #expect(fresh.grant(ofDigest: KeyRing.digest("secret-key_recent")) == nil, "kept for the audit, still refused")

        let keeper = directory(store, clock: clock, retention: nil)
        try await keeper.reload()
        clock.advance(by: day * 100)
        try await keeper.prune(endedBefore: Timestamp(microseconds: 0))
        #expect(try await store.keys(after: nil, limit: 100).count == 4, "nothing ended before the cutoff: nothing goes")
    }

    @Test("an idle replica reads no key; a revocation is one key read and refused at once; a full read lets go of keys another replica forgot")
    func readsWhatChanged() async throws {
        let clock = ManualClock(testStart)
        let store = CountingAccessStore()
        for index in 0..<2000 { try await store.insertKey(stored("key_\(index)", apps: ["com.\(index % 10)"])) }
        let a = directory(store, clock: clock)
        let b = directory(store, clock: clock)
        try await a.reload()
        try await b.reload()
        #expect(store.keysRead.load(ordering: .relaxed) == 4000, "the first read is every key")
        for _ in 0..<20 { try await b.reload() }
        #expect(store.keysRead.load(ordering: .relaxed) == 4000, "twenty reads of an unchanged table read no key")

        #expect(b.grant(ofDigest: KeyRing.digest("secret-key_7")) != nil)
        _ = try await store.revokeKey(id: "key_7", at: clock.now)
        try await b.reload()
        #expect(store.keysRead.load(ordering: .relaxed) == 4001, "a revocation is one key read")
        #expect(b.grant(ofDigest: KeyRing.digest("secret-key_7")) == nil)
        #expect(b.accepts(id: "key_7") == false && b.accepts(id: "key_8"))
        #expect(b.liveCount(appIds: ["com.7"]) == 199 && b.liveCount(appIds: ["com.8", "com.7"]) == 200 && b.liveCount(appIds: nil) == 0)

        try await a.reload()
        clock.advance(by: .seconds(86_400 * 2))
        try await a.prune(endedBefore: clock.now - .seconds(86_400))
        try await b.reload()
        #expect(b.stored(id: "key_7") != nil, "a deletion is not a change a short read sees")
        try await b.reload(full: true)
        #expect(b.stored(id: "key_7") == nil, "the full read lets it go")
        #expect(b.stored(id: "key_8") != nil && b.grant(ofDigest: KeyRing.digest("secret-key_8")) != nil)
    }
}
