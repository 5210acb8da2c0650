import SyncHealthCore
import SyncHealthTestSupport
import Synchronization
import Testing

@testable import SyncHealthSQLite
@testable import SyncHealthStore

/// Reads of the alerts table fold the journal's backlog first only when it holds a change to that table.
@Suite("SQLite store: alert reads and the backlog")
struct AlertReadFoldTests {
    static func folds(_ store: SQLiteStore) -> Int { store.backlog.withLock { $0.folds } }

    static func firingIds(_ store: SQLiteStore) async throws -> [String] {
        try await store.alerts(AlertQuery(state: .firing)).alerts.map(\.id)
    }

    @Test("a read of alerts folds when the backlog holds a transition or an erasure, not for other groups, and sees every commit")
    func alertReadsFoldOnlyForAlertChanges() async throws {
        let store = try SQLiteStore(directory: temporaryDirectory(), synchronous: .normal)
        let key = DeviceKey(appId: "com.example", deviceId: "d1")
        var fired = StoreChanges(recordedAt: t0)
        fired.devices = [richRecord("d1")]
        fired.alerts = [alert("a1", .syncError, .firing, device: "d1")]
        try await store.commit(fired)
        #expect(try await Self.firingIds(store) == ["a1"])
        #expect(Self.folds(store) == 1, "the transition was folded before the read")

        var quiet = StoreChanges(recordedAt: t0 + .seconds(1))
        quiet.devices = [richRecord("d1")]
        quiet.eventIds = [(key, "e1")]
        try await store.commit(quiet)
        #expect(try await Self.firingIds(store) == ["a1"])
        #expect(try await store.recentTransitions(limit: 10).map(\.id) == ["a1"])
        #expect(Self.folds(store) == 1, "a group without alert changes is left in the backlog")

        var erased = StoreChanges(recordedAt: t0 + .seconds(2))
        erased.removals = [DeviceRemoval(key: key, reason: .erased)]
        try await store.commit(erased)
        #expect(try await Self.firingIds(store) == [], "the erasure deleted the device's alerts before the read")
        #expect(Self.folds(store) == 2)
        try await store.close()
    }
}
