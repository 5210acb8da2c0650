import SyncHealthCore
import SyncHealthTestSupport
import Synchronization
import Testing

@testable import SyncHealthSQLite
@_spi(Testing) @testable import SyncHealthStore

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

    @Test(
        "a committer traps on a step out of order: append or abandon without judge, judge with a group open, a series ended with one open",
        .timeLimit(.minutes(2))
    )
    func stepsOutOfOrderTrap() async throws {
        await #expect(processExitsWith: .failure) {
            try? await StoreKind.memory.withLocalStore { store in
                try await store.commitSeries { committer in try committer.append(StoreChanges(recordedAt: t0), at: t0) }
            }
        }
        await #expect(processExitsWith: .failure) {
            try? await StoreKind.sqlite.withLocalStore { store in
                try await store.commitSeries { committer in
                    _ = try committer.judge([])
                    _ = try committer.judge([])
                }
            }
        }
        await #expect(processExitsWith: .failure) {
            try? await StoreKind.sqliteTables.withLocalStore { store in
                try await store.commitSeries { committer in committer.abandon() }
            }
        }
        await #expect(processExitsWith: .failure) {
            try? await StoreKind.sqliteTables.withLocalStore { store in
                try await store.commitSeries { committer in
                    _ = try committer.judge([])
                    _ = try committer.judge([])
                }
            }
        }
        await #expect(processExitsWith: .failure) {
            try? await StoreKind.memory.withLocalStore { store in
                try await store.commitSeries { committer in _ = try committer.judge([]) }
            }
        }
        // In order, the same steps run on every store.
        for kind in StoreKind.local {
            try await kind.withLocalStore { store in
                let key = DeviceKey(appId: "app", deviceId: "phone")
                let seen = try await store.commitSeries { committer in
                    _ = try committer.judge([(key, ["a"])])
                    committer.abandon()
                    _ = try committer.judge([(key, ["a"])])
                    try committer.append(StoreChanges(recordedAt: t0), at: t0)
                    let seen = try committer.judge([(key, ["a", "b"])])
                    committer.abandon()
                    return seen
                }
                #expect(seen == [["a"]], "\(kind): the abandoned group records nothing, the appended one its id")
            }
        }
    }
}
