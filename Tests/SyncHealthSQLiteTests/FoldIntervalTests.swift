import SyncHealthCore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthSQLite
@testable import SyncHealthStore

/// When the maintenance service folds: once the backlog is as old as the store's fold interval (`--fold-interval`).
@Suite("SQLite store: the fold interval")
struct FoldIntervalTests {
    static func commitOne(_ store: SQLiteStore) async throws {
        var changes = StoreChanges(recordedAt: t0)
        changes.devices = [richRecord("d1")]
        changes.eventIds = [(DeviceKey(appId: "com.example", deviceId: "d1"), "e1")]
        try await store.commit(changes)
    }

    @Test("a backlog is due for a fold once it is as old as the fold interval, and not before")
    func backlogIsDueAtTheFoldInterval() async throws {
        let store = try SQLiteStore(directory: temporaryDirectory(), synchronous: .normal, foldInterval: .seconds(60))
        #expect(store.foldInterval == .seconds(60))
        #expect(!store.foldIsDue(), "an empty backlog is never due")
        let before = ContinuousClock.now
        try await Self.commitOne(store)
        let after = ContinuousClock.now
        #expect(!store.foldIsDue(now: after + .seconds(30)), "half the interval")
        #expect(!store.foldIsDue(now: before + .seconds(59)), "just under the interval")
        #expect(store.foldIsDue(now: after + .seconds(60)), "the whole interval")
        try await store.close()
    }

    @Test("the default fold interval is two seconds")
    func defaultIntervalIsTwoSeconds() async throws {
        let store = try SQLiteStore(directory: temporaryDirectory(), synchronous: .normal)
        #expect(store.foldInterval == .seconds(2))
        try await Self.commitOne(store)
        #expect(store.foldIsDue(now: .now + .seconds(2)))
        try await store.close()
    }
}
