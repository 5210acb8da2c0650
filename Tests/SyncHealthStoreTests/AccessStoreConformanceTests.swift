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
            var all = try await store.keys()
            #expect(
                all == [key("key_a", apps: nil), key("key_bb", role: "admin", apps: ["com.a", "com.b"], at: 1)],
                "a second insert of an id changes nothing"
            )

            #expect(try await store.revokeKey(id: "key_bb", at: t0 + .seconds(10)))
            #expect(try await store.revokeKey(id: "key_bb", at: t0 + .seconds(20)))
            #expect(try await store.revokeKey(id: "key_none", at: t0) == false)
            try await store.touchKeys(["key_a": t0 + .seconds(30)])
            try await store.touchKeys(["key_a": t0 + .seconds(5), "key_none": t0])
            all = try await store.keys()
            #expect(all[1].revokedAt == t0 + .seconds(10), "the first revocation stands")
            #expect(all[0].revokedAt == nil)
            #expect(all[0].lastUsedAt == t0 + .seconds(30), "never moved back")
            #expect(all[0].secretDigest.count == 32)
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
