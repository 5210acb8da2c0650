import SyncHealthCore
import SyncHealthTestSupport
import Synchronization
import Testing

@testable import SyncHealthSQLite
@testable import SyncHealthStore

/// The webhook sender's reads of the outbox fold the journal's backlog first only when it holds messages; deleting
/// a webhook folds whatever it holds.
@Suite("SQLite store: outbox reads and the backlog")
struct OutboxReadFoldTests {
    static func folds(_ store: SQLiteStore) -> Int { store.backlog.withLock { $0.folds } }

    @Test("the outbox reads fold when the backlog holds messages, not for other groups, and see every commit")
    func outboxReadsFoldOnlyForMessages() async throws {
        let store = try SQLiteStore(directory: temporaryDirectory(), synchronous: .normal)
        try await store.saveWebhook(subscription("wh_1"))
        var quiet = StoreChanges(recordedAt: t0)
        quiet.devices = [richRecord("d1")]
        quiet.eventIds = [(DeviceKey(appId: "com.example", deviceId: "d1"), "e1")]
        try await store.commit(quiet)
        #expect(try await store.dueMessages(now: t0, limit: 10).isEmpty)
        #expect(try await store.nextDueTime() == nil)
        #expect(Self.folds(store) == 0, "a backlog without messages is left for the maintenance service")

        var sent = StoreChanges(recordedAt: t0 + .seconds(1))
        sent.outbox = [message("m1", webhook: "wh_1")]
        try await store.commit(sent)
        #expect(try await store.nextDueTime() == t0)
        #expect(Self.folds(store) == 1, "the message was folded before the read")
        #expect(try await store.dueMessages(now: t0, limit: 10).map(\.id) == ["m1"])
        #expect(Self.folds(store) == 1)

        var later = StoreChanges(recordedAt: t0 + .seconds(2))
        later.devices = [richRecord("d1")]
        later.eventIds = [(DeviceKey(appId: "com.example", deviceId: "d1"), "e2")]
        try await store.commit(later)
        #expect(try await store.deleteWebhook(id: "wh_1"))
        #expect(Self.folds(store) == 2, "a deletion folds whatever the backlog holds")
        try await store.close()
    }
}
