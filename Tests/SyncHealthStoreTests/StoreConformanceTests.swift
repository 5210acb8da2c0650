import Foundation
import GRDB
import Logging
import ServiceLifecycle
import SyncHealthCore
import SyncHealthPostgres
import SyncHealthTestSupport
import Testing

@testable import SyncHealthSQLite
@_spi(Testing) @testable import SyncHealthStore

/// Every store implementation, made fresh for each test. PostgreSQL is in the list when the run has a
/// throwaway cluster (`scripts/test` starts one).
enum StoreKind: String, CaseIterable, CustomTestStringConvertible {
    case memory
    case sqlite
    /// SQLite with each group committed straight into the tables, no journal.
    case sqliteTables
    case postgres

    static var allCases: [StoreKind] {
        PostgresTesting.baseURL == nil ? [.memory, .sqlite, .sqliteTables] : [.memory, .sqlite, .sqliteTables, .postgres]
    }

    var testDescription: String { rawValue }

    /// Runs `body` with a fresh, empty store, then closes it.
    func withStore<T>(_ body: (any SyncStore) async throws -> T) async throws -> T {
        switch self {
        case .memory:
            let store = InMemoryStore()
            let result = try await body(store)
            try await store.close()
            return result
        case .sqlite, .sqliteTables:
            let store = try SQLiteStore(
                directory: temporaryDirectory(),
                synchronous: .normal,
                commitPath: self == .sqlite ? .journal : .tables,
                // Generations of a second: the suite's times are seconds apart, so expiry here is by the id.
                eventIdGeneration: .seconds(1)
            )
            let result = try await body(store)
            try await store.close()
            return result
        case .postgres:
            return try await withPostgresStore { try await body($0) }
        }
    }
}

@Suite("Store conformance: every SyncStore behaves the same")
struct StoreConformanceTests {
    @Test("committed devices load back equal, in insertion order", arguments: StoreKind.allCases)
    func devicesRoundTrip(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let a = richRecord("a")
            let b = richRecord("b")
            let c = DeviceRecord(key: DeviceKey(appId: "x", deviceId: "c"), firstSeenAt: t0)
            var changes = StoreChanges(recordedAt: t0)
            changes.devices = [b, a]
            try await store.commit(changes)
            var second = StoreChanges(recordedAt: t0)
            var a2 = a
            a2.monitor.network = false
            second.devices = [c, a2]
            try await store.commit(second)
            let state = try await store.loadState()
            #expect(state.devices.map(\.key.deviceId) == ["b", "a", "c"])
            #expect(state.devices[0] == b)
            #expect(state.devices[1] == a2)
            #expect(state.devices[1].syncError.firingSince != nil, "timers survive")
            #expect(state.devices[2] == c)
        }
    }

    @Test("event ids are remembered per device, and pruned by age", arguments: StoreKind.allCases)
    func eventIds(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let k1 = DeviceKey(appId: "app", deviceId: "1")
            let k2 = DeviceKey(appId: "app", deviceId: "2")
            var changes = StoreChanges(recordedAt: t0)
            changes.eventIds = [(k1, "e1"), (k1, "e2"), (k2, "e3")]
            try await store.commit(changes)
            var later = StoreChanges(recordedAt: t0 + .seconds(100))
            later.eventIds = [(k1, "e4")]
            try await store.commit(later)
            let seen = try await store.seenEventIds([(k1, ["e1", "e3", "e4", "zz"]), (k2, ["e1", "e3"]), (k1, [])])
            #expect(seen == [["e1", "e4"], ["e3"], []])
            let pruned = try await store.pruneEventIds(recordedBefore: t0 + .seconds(50))
            #expect(pruned == 3)
            let after = try await store.seenEventIds([(k1, ["e1", "e2", "e4"])])
            #expect(after == [["e4"]])
        }
    }

    @Test(
        "pruning forgets at most its limit of expired ids a call, until a short call says none is left; newer ids stay",
        arguments: StoreKind.allCases
    )
    func pruneInBatches(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let keys = (0..<3).map { DeviceKey(appId: "app", deviceId: "\($0)") }
            var old = StoreChanges(recordedAt: t0)
            old.eventIds = keys.flatMap { key in (0..<3).map { (key, "old-\($0)") } }
            try await store.commit(old)
            var recent = StoreChanges(recordedAt: t0 + .seconds(100))
            recent.eventIds = keys.map { ($0, "recent") }
            try await store.commit(recent)
            let cutoff = t0 + .seconds(50)
            #expect(try await store.pruneEventIds(recordedBefore: cutoff, limit: 4) == 4)
            #expect(try await store.pruneEventIds(recordedBefore: cutoff, limit: 4) == 4)
            #expect(try await store.pruneEventIds(recordedBefore: cutoff, limit: 4) == 1)
            #expect(try await store.pruneEventIds(recordedBefore: cutoff, limit: 4) == 0)
            let left = try await store.seenEventIds(keys.map { ($0, ["old-0", "old-1", "old-2", "recent"]) })
            #expect(left == [["recent"], ["recent"], ["recent"]])
        }
    }

    @Test(
        "a claiming commit records the ids, tells the plan which were recorded before, and writes what the plan returns",
        arguments: StoreKind.allCases
    )
    func claimingCommit(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let k1 = DeviceKey(appId: "app", deviceId: "1")
            let k2 = DeviceKey(appId: "app", deviceId: "2")
            var before = StoreChanges(recordedAt: t0)
            before.eventIds = [(k1, "old")]
            try await store.commit(before)
            let seen = try await store.commit(
                claiming: [(k1, ["old", "new", "new"]), (k2, ["old"]), (k1, ["new", "x"])],
                at: t0 + .seconds(10)
            ) { seen in
                var changes = StoreChanges(recordedAt: t0 + .seconds(10))
                changes.devices = [DeviceRecord(key: k1, firstSeenAt: t0)]
                changes.eventIds = [(k2, "not claimed")]
                return (changes, seen)
            }
            // Repeats within the call were not recorded before it: the caller judges those.
            #expect(seen == [["old"], [], []])
            #expect(try await store.loadState().devices.map(\.key) == [k1])
            let recorded = try await store.seenEventIds([(k1, ["old", "new", "x"]), (k2, ["old", "not claimed"])])
            #expect(recorded == [["old", "new", "x"], ["old"]], "the claims are recorded; changes.eventIds is ignored")
            // The first repeat of a group comes after ids it recorded (in earlier claims and earlier in its own).
            let repeats = try await store.commit(
                claiming: [(k2, ["p", "r"]), (k2, ["q", "p"]), (k1, ["x", "r"]), (k2, ["r"])],
                at: t0 + .seconds(20)
            ) { seen in (StoreChanges(recordedAt: t0 + .seconds(20)), seen) }
            #expect(repeats == [[], [], ["x"], []])
            // The claimed ids carry the claim's time: pruning before it removes only the older id.
            #expect(try await store.pruneEventIds(recordedBefore: t0 + .seconds(5)) == 1)
        }
    }

    @Test("a claiming commit whose plan throws writes nothing, its ids included", arguments: StoreKind.allCases)
    func claimingCommitRollsBack(kind: StoreKind) async throws {
        struct PlanFailed: Error {}
        try await kind.withStore { store in
            let k1 = DeviceKey(appId: "app", deviceId: "1")
            await #expect(throws: PlanFailed.self) {
                try await store.commit(claiming: [(k1, ["a", "b"])], at: t0) { _ -> (changes: StoreChanges, result: Int) in
                    throw PlanFailed()
                }
            }
            let recorded = try await store.seenEventIds([(k1, ["a", "b"])])
            let state = try await store.loadState()
            #expect(recorded == [[]])
            #expect(state.devices.isEmpty)
        }
    }

    @Test("alerts insert, resolve in place, filter, and page newest first", arguments: StoreKind.allCases)
    func alerts(kind: StoreKind) async throws {
        try await kind.withStore { store in
            var changes = StoreChanges(recordedAt: t0)
            changes.alerts = (0..<7).map { alert("al\($0)", $0 % 2 == 0 ? .syncError : .notSyncing, .firing, at: Int64($0)) }
            try await store.commit(changes)
            var resolve = StoreChanges(recordedAt: t0)
            resolve.alerts = [alert("al2", .syncError, .resolved, at: 2)]
            try await store.commit(resolve)

            let all = try await store.alerts(AlertQuery(limit: 100))
            #expect(all.alerts.map(\.id) == ["al6", "al5", "al4", "al3", "al2", "al1", "al0"])
            #expect(all.nextCursor == nil)
            #expect(all.alerts[4].state == .resolved)
            #expect(all.alerts[4].endsAt == t0 + .seconds(7))

            let firingErrors = try await store.alerts(AlertQuery(state: .firing, kind: .syncError))
            #expect(firingErrors.alerts.map(\.id) == ["al6", "al4", "al0"])

            var pages: [[String]] = []
            var cursor: Int64?
            repeat {
                let page = try await store.alerts(AlertQuery(state: .firing, limit: 2, cursor: cursor))
                pages.append(page.alerts.map(\.id))
                cursor = page.nextCursor
            } while cursor != nil && pages.count < 10
            #expect(pages == [["al6", "al5"], ["al4", "al3"], ["al1", "al0"]])
        }
    }

    @Test(
        "a forgotten device leaves the devices; its alerts stay, resolved with their reason; it comes back at the end",
        arguments: StoreKind.allCases
    )
    func forgottenDevice(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let a = richRecord("a")
            let b = richRecord("b")
            var changes = StoreChanges(recordedAt: t0)
            changes.devices = [a, b]
            changes.alerts = [alert("al-a", .syncError, .firing, device: "a"), alert("al-b", .syncError, .firing, device: "b")]
            try await store.commit(changes)

            var forget = StoreChanges(recordedAt: t0 + .seconds(10))
            var resolved = alert("al-a", .syncError, .resolved, device: "a")
            resolved.reason = .forgotten
            forget.alerts = [resolved]
            forget.removals = [DeviceRemoval(key: a.key, reason: .forgotten)]
            try await store.commit(forget)
            #expect(try await store.loadState().devices.map(\.key.deviceId) == ["b"])
            let alerts = try await store.alerts(AlertQuery()).alerts
            #expect(alerts.map(\.id) == ["al-b", "al-a"])
            #expect(alerts.map(\.state) == [.firing, .resolved])
            #expect(alerts.map(\.reason) == [nil, .forgotten])

            var back = StoreChanges(recordedAt: t0 + .seconds(20))
            back.devices = [DeviceRecord(key: a.key, firstSeenAt: t0 + .seconds(20))]
            try await store.commit(back)
            let devices = try await store.loadState().devices
            #expect(devices.map(\.key.deviceId) == ["b", "a"], "a device that comes back is new, at the end")
            #expect(devices.last?.firstSeenAt == t0 + .seconds(20))
        }
    }

    @Test(
        "an erased device leaves no record, alert, queued message or event id; others keep theirs; it can come back",
        arguments: StoreKind.allCases
    )
    func erasedDevice(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let a = richRecord("a")
            let b = richRecord("b")
            var changes = StoreChanges(recordedAt: t0)
            changes.devices = [a, b]
            changes.eventIds = [(a.key, "e1"), (a.key, "e2"), (b.key, "e1")]
            changes.alerts = [alert("al-a", .syncError, .firing, device: "a"), alert("al-b", .syncError, .firing, device: "b")]
            changes.outbox = [
                message("m-a", line: AlertLine.device(a.key, .syncError).storageKey),
                message("m-b", line: AlertLine.device(b.key, .syncError).storageKey),
            ]
            try await store.commit(changes)

            var erase = StoreChanges(recordedAt: t0 + .seconds(10))
            erase.removals = [DeviceRemoval(key: a.key, reason: .erased)]
            try await store.commit(erase)
            // A shared store deletes the ids outside the group; the embedded one sweeps them between folds.
            if let shared = store as? any SharedSyncStore {
                try await shared.eraseEventIds(of: a.key, recordedThrough: t0 + .seconds(10))
            }
            if let sqlite = store as? SQLiteStore {
                try await sqlite.fold()
                while try await sqlite.sweepErasedEventIds(limit: 2) {}
            }

            #expect(try await store.loadState().devices.map(\.key.deviceId) == ["b"])
            #expect(try await store.alerts(AlertQuery()).alerts.map(\.id) == ["al-b"])
            #expect(try await store.dueMessages(now: t0 + .seconds(100), limit: 10).map(\.id) == ["m-b"])
            #expect(try await store.seenEventIds([(a.key, ["e1", "e2"]), (b.key, ["e1"])]) == [[], ["e1"]])

            let seen = try await store.commit(claiming: [(a.key, ["e1"])], at: t0 + .seconds(20)) { seen in
                var back = StoreChanges(recordedAt: t0 + .seconds(20))
                back.devices = [DeviceRecord(key: a.key, firstSeenAt: t0 + .seconds(20))]
                return (back, seen)
            }
            #expect(seen == [[]], "an id the device sent before its erasure is new")
            #expect(try await store.loadState().devices.map(\.key.deviceId) == ["b", "a"])
        }
    }

    @Test(
        "history older than the retention is forgotten in batches: resolved alerts, old delivery attempts, resolved incidents; the rest stays",
        arguments: StoreKind.allCases
    )
    func pruneHistory(kind: StoreKind) async throws {
        try await kind.withStore { store in
            try await store.saveWebhook(subscription())
            var changes = StoreChanges(recordedAt: t0)
            // Resolved at 5 s (al0-al2) and at 105 s (al3); al4 still firing since 0 s.
            changes.alerts = (0..<3).map { alert("al\($0)", .syncError, .resolved, device: "d\($0)") }
            changes.alerts.append(alert("al3", .syncError, .resolved, device: "d3", at: 100))
            changes.alerts.append(alert("al4", .syncError, .firing, device: "d4"))
            try await store.commit(changes)
            for (i, at) in [0, 1, 200].enumerated() {
                try await store.recordAttempt(
                    DeliveryAttempt(
                        webhookId: "wh_1",
                        messageId: "m\(i)",
                        attempt: 1,
                        attemptedAt: t0 + .seconds(Int64(at)),
                        statusCode: 200,
                        error: nil,
                        nextRetryAt: nil,
                        outcome: .delivered
                    ),
                    disable: nil
                )
            }
            let old = IncidentStoreConformanceTests.record(5, state: .resolved)
            let open = IncidentStoreConformanceTests.record(6)
            try await store.saveIncidents([old, open], messages: [])

            let cutoff = t0 + .seconds(50)
            var total = 0
            var calls = 0
            while true {
                let removed = try await store.pruneHistory(before: cutoff, limit: 2)
                total += removed
                calls += 1
                if removed < 2 || calls > 10 { break }
            }
            #expect(total == 6, "3 alerts, 2 attempts, 1 incident")
            #expect(calls >= 2, "in batches")
            #expect(try await store.alerts(AlertQuery()).alerts.map(\.id) == ["al4", "al3"])
            #expect(try await store.deliveries(webhookId: "wh_1", limit: 10, before: nil).attempts.map(\.messageId) == ["m2"])
            #expect(try await store.incident(id: old.id) == nil)
            #expect(try await store.incident(id: open.id) != nil)
        }
    }

    @Test("fleet alerts start and end", arguments: StoreKind.allCases)
    func fleetAlerts(kind: StoreKind) async throws {
        try await kind.withStore { store in
            var changes = StoreChanges(recordedAt: t0)
            changes.fleetAlerts = [("c1", t0), ("c2", t0 + .seconds(1))]
            try await store.commit(changes)
            var end = StoreChanges(recordedAt: t0)
            end.fleetAlerts = [("c1", nil)]
            try await store.commit(end)
            #expect(try await store.loadState().fleetAlerts == ["c2": t0 + .seconds(1)])
        }
    }
}
