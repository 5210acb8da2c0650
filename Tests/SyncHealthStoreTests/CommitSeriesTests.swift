import SyncHealthCore
import SyncHealthTestSupport
import Synchronization
import Testing

@testable import SyncHealthStore

extension StoreKind {
    /// The stores one process alone writes.
    static let local: [StoreKind] = [.memory, .sqlite, .sqliteTables]

    /// `withStore`, for a store that commits in series.
    func withLocalStore<T>(_ body: (any LocalSyncStore) async throws -> T) async throws -> T {
        try await withStore { store in
            let local = try #require(store as? any LocalSyncStore)
            return try await body(local)
        }
    }
}

struct CommitSeriesTests {
    struct PlanFailed: Error {}

    /// A group that writes the device `name` and returns which of its claimed ids were recorded before it.
    static func plan(_ name: String, at: Timestamp) -> (_ seen: [Set<String>]) throws -> (changes: StoreChanges, result: [Set<String>]) {
        { seen in
            var changes = StoreChanges(recordedAt: at)
            changes.devices = [DeviceRecord(key: DeviceKey(appId: "app", deviceId: name), firstSeenAt: at)]
            return (changes, seen)
        }
    }

    @Test(
        "each group of a series sees the ids the groups before it recorded; a group whose plan throws is not written, and the series goes on",
        arguments: StoreKind.local
    )
    func groupsOfASeries(kind: StoreKind) async throws {
        try await kind.withLocalStore { store in
            let key = DeviceKey(appId: "app", deviceId: "phone")
            let (first, second, third) = try await store.commitSeries { committer in
                let first = try committer.commit(claiming: [(key, ["a"])], at: t0, plan: Self.plan("one", at: t0))
                let second: String
                do {
                    _ = try committer.commit(claiming: [(key, ["a", "b"])], at: t0 + .seconds(1)) { _ -> (changes: StoreChanges, result: Int) in
                        throw PlanFailed()
                    }
                    second = "written"
                } catch is PlanFailed {
                    second = "refused"
                }
                let third = try committer.commit(claiming: [(key, ["b", "a"])], at: t0 + .seconds(2), plan: Self.plan("three", at: t0 + .seconds(2)))
                return (first, second, third)
            }
            #expect(first == [[]])
            #expect(second == "refused")
            #expect(third == [["a"]], "the first group's id is recorded; the refused group's is not")
            #expect(try await store.loadState().devices.map(\.key.deviceId) == ["one", "three"])
            #expect(try await store.seenEventIds([(key, ["a", "b", "c"])]) == [["a", "b"]])
        }
    }

    @Test("a journal sync that fails in the middle of a series refuses that group alone: the groups before and after it stay, also after a crash")
    func failedSyncInASeries() async throws {
        let disk = FaultyDisk()
        let (dir, store) = try await CommitJournalTests.storeWithGroupA(on: disk)
        let refused = try await store.commitSeries { committer -> [String] in
            var refused: [String] = []
            for (i, name) in ["b", "c", "d"].enumerated() {
                // The second group's sync fails: its whole record reached the file first.
                if name == "c" { disk.faults.withLock { $0.syncs = 1 } }
                let group = CommitJournalTests.group(name, at: Int64(i + 1))
                do {
                    try committer.commit(claiming: group.eventIds.map { ($0.key, [$0.eventId]) }, at: group.recordedAt) { _ in (group, ()) }
                } catch {
                    refused.append(name)
                }
            }
            return refused
        }
        #expect(refused == ["c"])
        #expect(disk.faults.withLock { $0.syncs } == 0, "the fault was hit")
        let copy = try CommitJournalTests.crashCopy(of: dir)
        try await store.close()
        let reopened = try SQLiteStore(directory: copy)
        try await CommitJournalTests.check(reopened, has: ["a", "b", "d"], lacks: ["c"])
        try await reopened.close()
    }
}
