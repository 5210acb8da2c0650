import Logging
import PostgresNIO
import ServiceLifecycle
import SyncHealthCore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthPostgres
@testable import SyncHealthStore

/// What several replicas rely on: device locks, timer claims, counters and webhook leases.
@Suite("Shared store (PostgreSQL): locks, timer claims, counters, leases", .enabled(if: PostgresTesting.baseURL != nil))
struct SharedStoreTests {
    @Test("a due timer is claimed by one transaction; the others skip it until it commits; a rollback leaves it due")
    func timerClaims() async throws {
        try await withPostgresStore { store in
            let key = DeviceKey(appId: "app", deviceId: "d1")
            var changes = StoreChanges(recordedAt: t0)
            changes.devices = [DeviceRecord(key: key, firstSeenAt: t0)]
            changes.deadlines = [key: t0 + .seconds(10)]
            try await store.commit(changes)
            #expect(try await store.nextDeviceDeadline() == t0 + .seconds(10))

            try await store.transaction { tx in
                #expect(try await tx.claimDueDevices(now: t0 + .seconds(5), limit: 10).isEmpty, "not due yet")
                let claimed = try await tx.claimDueDevices(now: t0 + .seconds(10), limit: 10)
                #expect(claimed.map(\.record.key) == [key])
                #expect(claimed.first?.countedAt == t0)
                let other = try await store.transaction { try await $0.claimDueDevices(now: t0 + .seconds(10), limit: 10) }
                #expect(other.isEmpty, "held by the first transaction")
            }
            struct Rollback: Error {}
            await #expect(throws: Rollback.self) {
                try await store.transaction { tx in
                    _ = try await tx.claimDueDevices(now: t0 + .seconds(10), limit: 10)
                    throw Rollback()
                }
            }
            let again = try await store.transaction { try await $0.claimDueDevices(now: t0 + .seconds(10), limit: 10) }
            #expect(again.map(\.record.key) == [key], "a transaction that died leaves the timer to the next replica")
        }
    }

    @Test("device locks serialize writers, for stored and not yet stored devices alike")
    func deviceLocks() async throws {
        try await withPostgresStore { store in
            let key = DeviceKey(appId: "app", deviceId: "new")
            // 20 concurrent read-modify-write transactions on one device that does not exist yet: each appends
            // one pending change; with the lock none is lost.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        try await store.transaction { tx in
                            let found = try await tx.lockDevices([key])
                            var record = found[key]?.record ?? DeviceRecord(key: key, firstSeenAt: t0)
                            record.monitor.pendingChanges += 1
                            var changes = StoreChanges(recordedAt: t0)
                            changes.devices = [record]
                            try await tx.write(changes)
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await store.device(key)?.monitor.pendingChanges == 20)
        }
    }

    @Test("counter deltas add up per scope and read back O(1); container counts come back from the same call")
    func counters() async throws {
        try await withPostgresStore { store in
            let broken = FleetContribution(appId: "a", containerId: "c", summary: .error, notSyncing: false, errorClass: .userAction, silent: false)
            let fine = FleetContribution(appId: "a", containerId: "c", summary: .succeeded, notSyncing: false, errorClass: nil, silent: false)
            var first = FleetCounters()
            first.replace(nil, with: broken)
            first.replace(nil, with: fine)
            let firstDeltas = first
            _ = try await store.transaction { try await $0.addCounts(firstDeltas, returning: []) }
            var second = FleetCounters()
            second.replace(broken, with: fine)
            let secondDeltas = second
            let counts = try await store.transaction { try await $0.addCounts(secondDeltas, returning: ["c", "empty"]) }
            var reference = FleetCounters()
            reference.replace(nil, with: fine)
            reference.replace(nil, with: fine)
            #expect(counts["c"] == reference[FleetScope(containerId: "c")])
            #expect(counts["empty"] == FleetCounts())
            #expect(try await store.counts(.all) == reference[.all])
            #expect(try await store.counts(FleetScope(appId: "a")) == reference[FleetScope(appId: "a")])
            #expect(try await store.counts(FleetScope(appId: "a", containerId: "c")).devices == 2)
            #expect(try await store.counts(FleetScope(appId: "other")) == FleetCounts())
        }
    }

    @Test("a message handed to one replica is leased: another gets it only when the lease runs out")
    func webhookLease() async throws {
        try await withPostgresStore(deliveryLease: .seconds(30)) { store in
            try await store.saveWebhook(subscription())
            var changes = StoreChanges(recordedAt: t0)
            changes.outbox = [message("m1", line: "A"), message("m2", line: "B")]
            try await store.commit(changes)
            // Two replicas ask at once: each message goes to one of them.
            async let first = store.dueMessages(now: t0, limit: 10)
            async let second = store.dueMessages(now: t0, limit: 10)
            let handed = try await first.map(\.id) + second.map(\.id)
            #expect(handed.sorted() == ["m1", "m2"])
            #expect(try await store.dueMessages(now: t0 + .seconds(29), limit: 10).isEmpty)
            #expect(try await store.nextDueTime() == t0 + .seconds(30))
            #expect(try await store.dueMessages(now: t0 + .seconds(30), limit: 10).map(\.id) == ["m1", "m2"], "the lease ran out")
        }
    }

    @Test("devices list by filter in first-seen order, and by id across apps")
    func deviceReads() async throws {
        try await withPostgresStore { store in
            var changes = StoreChanges(recordedAt: t0)
            changes.devices = [
                richRecord("x", app: "a1"), DeviceRecord(key: DeviceKey(appId: "a2", deviceId: "x"), firstSeenAt: t0),
                DeviceRecord(key: DeviceKey(appId: "a1", deviceId: "y"), firstSeenAt: t0),
            ]
            try await store.commit(changes)
            #expect(try await store.deviceKeys(deviceId: "x").map(\.appId) == ["a1", "a2"])
            let page1 = try await store.devices(DeviceQuery(), after: 0, limit: 2)
            #expect(page1.records.map(\.key.deviceId) == ["x", "x"])
            let page2 = try await store.devices(DeviceQuery(), after: try #require(page1.nextCursor), limit: 2)
            #expect(page2.records.map(\.key.deviceId) == ["y"])
            #expect(page2.nextCursor == nil)
            let summary = richRecord("x", app: "a1").monitor.summary
            #expect(try await store.devices(DeviceQuery(summary: summary), after: 0, limit: 10).records.contains { $0.key.appId == "a1" })
            #expect(
                try await store.devices(DeviceQuery(appId: "a1", containerId: "iCloud.x"), after: 0, limit: 10).records.map(\.key.deviceId) == ["x"]
            )
            #expect(try await store.device(DeviceKey(appId: "a1", deviceId: "x")) == richRecord("x", app: "a1"))
        }
    }
}

@Suite("PostgreSQL schema", .enabled(if: PostgresTesting.baseURL != nil))
struct PostgresSchemaTests {
    @Test("preparing again changes nothing; a schema written by a newer version is refused, not altered")
    func newerSchema() async throws {
        let url = try await PostgresTesting.freshDatabase()
        let store = try PostgresStore(url: url, logger: Logger(label: "test"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            let service = store.service
            group.addTask { try await service.run() }
            defer { group.cancelAll() }
            try await store.prepare()
            try await store.prepare()
            func versions() async throws -> [Int] {
                try await store.withTransaction { connection in
                    var out: [Int] = []
                    for try await v in try await connection.query(
                        "SELECT version FROM synchealth_migrations ORDER BY version",
                        logger: Logger(label: "test")
                    )
                    .decode(Int.self) { out.append(v) }
                    return out
                }
            }
            #expect(try await versions() == Array(1...PostgresStore.migrations.count))
            // A future version registered a migration this one does not know.
            let future = PostgresStore.migrations.count + 1
            try await store.withTransaction { connection in
                try await connection.query(
                    "INSERT INTO synchealth_migrations (version, name) VALUES (\(future), 'from the future')",
                    logger: Logger(label: "test")
                )
            }
            await #expect(throws: StoreError.self) { try await store.prepare() }
            #expect(try await versions() == Array(1...future))
        }
    }
}

@Suite("PostgreSQL is tested when the run requires it")
struct PostgresRequiredTests {
    @Test("scripts/test provides a throwaway cluster (SYNCHEALTH_REQUIRE_POSTGRES=1 makes its absence a failure)")
    func clusterPresent() {
        if PostgresTesting.required {
            #expect(PostgresTesting.baseURL != nil, "SYNCHEALTH_TEST_POSTGRES_URL is not set: the PostgreSQL store was not tested")
        }
    }
}
