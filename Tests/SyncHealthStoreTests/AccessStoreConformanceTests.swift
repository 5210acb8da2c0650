import SyncHealthCore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthStore

@Suite("Store conformance: API keys and the audit log")
struct AccessStoreConformanceTests {
    func key(_ id: String, role: String = "read", apps: [String]? = ["com.a"], at: Int64 = 0) -> StoredKey {
        StoredKey(
            id: id,
            role: role,
            appIds: apps,
            description: "team \(id)",
            secretDigest: Array(repeating: UInt8(id.utf8.count), count: 32),
            createdAt: t0 + .seconds(at),
            expiresAt: t0 + .seconds(3600),
            createdBy: "environment"
        )
    }

    @Test(
        "keys are written with their scope, listed oldest first, revoked once, and their last use only moves forward",
        arguments: StoreKind.allCases
    )
    func keys(kind: StoreKind) async throws {
        try await kind.withStore { store in
            try await store.insertKey(key("key_a", apps: nil))
            try await store.insertKey(key("key_bb", role: "admin", apps: ["com.a", "com.b"], at: 1))
            try await store.insertKey(key("key_a", role: "admin", at: 2))
            var all = try await store.keys(after: nil, limit: 100)
            #expect(
                all == [key("key_a", apps: nil), key("key_bb", role: "admin", apps: ["com.a", "com.b"], at: 1)],
                "a second insert of an id changes nothing"
            )

            #expect(try await store.revokeKey(id: "key_bb", at: t0 + .seconds(10)))
            #expect(try await store.revokeKey(id: "key_bb", at: t0 + .seconds(20)))
            #expect(try await store.revokeKey(id: "key_none", at: t0) == false)
            try await store.touchKeys(["key_a": t0 + .seconds(30)])
            try await store.touchKeys(["key_a": t0 + .seconds(5), "key_none": t0])
            all = try await store.keys(after: nil, limit: 100)
            #expect(all[1].revokedAt == t0 + .seconds(10), "the first revocation stands")
            #expect(all[0].revokedAt == nil)
            #expect(all[0].lastUsedAt == t0 + .seconds(30), "never moved back")
            #expect(all[0].secretDigest.count == 32)
        }
    }

    @Test(
        "creations and revocations are numbered in order and read after a number, last uses are not changes, and deleted keys go",
        arguments: StoreKind.allCases
    )
    func keyChanges(kind: StoreKind) async throws {
        try await kind.withStore { store in
            try await store.insertKey(key("key_a"))
            try await store.insertKey(key("key_b", at: 1))
            let firstRead = try await store.keyChanges(after: 0)
            let first = firstRead.changes
            #expect(firstRead.through == first.last?.seq, "the read knows the last number given")
            #expect(first.map(\.key.id) == ["key_a", "key_b"])
            #expect(first[0].seq >= 1 && first[0].seq < first[1].seq)
            let read = first[1].seq
            #expect(try await store.keyChanges(after: read).changes.isEmpty, "nothing changed since the last read")

            try await store.touchKeys(["key_a": t0 + .seconds(5)])
            #expect(try await store.keyChanges(after: read).changes.isEmpty, "a last use is not a change")
            try await store.insertKey(key("key_a", role: "admin"))
            #expect(try await store.keyChanges(after: read).changes.isEmpty, "an insert that changes nothing is not a change")

            _ = try await store.revokeKey(id: "key_a", at: t0 + .seconds(10))
            try await store.insertKey(key("key_c", at: 2))
            let second = try await store.keyChanges(after: read).changes
            #expect(second.map(\.key.id) == ["key_a", "key_c"], "the revocation, then the creation, in their order")
            #expect(second[0].key.revokedAt == t0 + .seconds(10) && second[0].seq > read && second[1].seq > second[0].seq)

            #expect(try await store.deleteKeys(ids: ["key_a", "key_c", "key_none"]) == 2)
            #expect(try await store.keys(after: nil, limit: 10).map(\.id) == ["key_b"])
            let afterDelete = try await store.keyChanges(after: 0)
            #expect(afterDelete.changes.map(\.key.id) == ["key_b"])
            #expect(afterDelete.through == second[1].seq, "the last number stays given although its key is deleted")
            try await store.insertKey(key("key_d", at: 3))
            let third = try await store.keyChanges(after: second[1].seq).changes
            #expect(third.map(\.key.id) == ["key_d"], "a number is never given twice, even after the last one's key is deleted")
        }
    }

    @Test("keys are paged oldest first, then by id, after a position", arguments: StoreKind.allCases)
    func keyPages(kind: StoreKind) async throws {
        try await kind.withStore { store in
            for (id, at) in [("key_c", 0), ("key_a", 1), ("key_b", 1), ("key_d", 2), ("key_e", 3)] {
                try await store.insertKey(key(id, at: Int64(at)))
            }
            let first = try await store.keys(after: nil, limit: 2)
            #expect(first.map(\.id) == ["key_c", "key_a"])
            let second = try await store.keys(after: first.last.map(KeyPosition.init(after:)), limit: 2)
            #expect(second.map(\.id) == ["key_b", "key_d"], "the same creation time is ordered by id")
            let third = try await store.keys(after: second.last.map(KeyPosition.init(after:)), limit: 2)
            #expect(third.map(\.id) == ["key_e"])
            let gone = KeyPosition(createdAt: t0 + .seconds(1), id: "key_aa")
            #expect(try await store.keys(after: gone, limit: 10).map(\.id) == ["key_b", "key_d", "key_e"], "a position need not be a stored key")
        }
    }

    @Test("the audit log is paged newest first and forgets entries older than the cutoff", arguments: StoreKind.allCases)
    func audit(kind: StoreKind) async throws {
        try await kind.withStore { store in
            for i in 0..<5 {
                try await store.appendAudit(
                    AuditEntry(at: t0 + .seconds(Int64(i)), keyId: "key_a", action: "silence.create", target: "si_\(i)", address: "127.0.0.1")
                )
            }
            let first = try await store.auditEntries(before: nil, limit: 2)
            #expect(first.map(\.target) == ["si_4", "si_3"])
            let second = try await store.auditEntries(before: first.last?.seq, limit: 10)
            #expect(second.map(\.target) == ["si_2", "si_1", "si_0"])
            #expect(second[0].keyId == "key_a" && second[0].action == "silence.create" && second[0].address == "127.0.0.1")
            #expect(second[0].at == t0 + .seconds(2))
            #expect(try await store.pruneAudit(before: t0 + .seconds(2), limit: 1) == 1)
            #expect(try await store.pruneAudit(before: t0 + .seconds(2), limit: 10) == 1)
            #expect(try await store.auditEntries(before: nil, limit: 10).map(\.target) == ["si_4", "si_3", "si_2"])
        }
    }
}
