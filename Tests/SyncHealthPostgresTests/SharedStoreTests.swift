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
    @Test("a due timer read by one group is hidden from the others for the timer lease, then due again (its replica died)")
    func timerClaims() async throws {
        try await withPostgresStore { store in
            let key = DeviceKey(appId: "app", deviceId: "d1")
            var changes = StoreChanges(recordedAt: t0)
            changes.devices = [DeviceRecord(key: key, firstSeenAt: t0)]
            changes.deadlines = [key: t0 + .seconds(10)]
            try await store.commit(changes)
            #expect(try await store.nextDeviceDeadline() == t0 + .seconds(10))

            func due(at now: Timestamp) async throws -> [StoredDevice] {
                try await store.group { try await $0.read(GroupRead(keys: [], claims: [], now: now, dueLimit: 10, containers: [])).due }
            }
            #expect(try await due(at: t0 + .seconds(5)).isEmpty, "not due yet")
            let claimed = try await due(at: t0 + .seconds(10))
            #expect(claimed.map(\.record.key) == [key])
            #expect(claimed.first?.countedAt == t0)
            #expect(claimed.first?.version == 1)
            #expect(try await due(at: t0 + .seconds(11)).isEmpty, "claimed by the first group")
            let lease = store.timerLease
            #expect(try await due(at: t0 + .seconds(10) + lease).map(\.record.key) == [key], "the lease ran out: the next replica takes it")
        }
    }

    @Test("a device's stored deadline moves only earlier, except where the group claimed its timers; such writes update the row in place")
    func deadlinesMoveEarlier() async throws {
        try await withPostgresStore { store in
            let key = DeviceKey(appId: "app", deviceId: "timed")
            var version: Int64 = 0
            func write(deadline: Timestamp?, claimed: Bool) async throws {
                var changes = StoreChanges(recordedAt: t0)
                changes.devices = [DeviceRecord(key: key, firstSeenAt: t0)]
                if let deadline { changes.deadlines[key] = deadline }
                let write = GroupWrite(
                    changes: changes,
                    versions: [key: version],
                    fleetAlertsRead: [:],
                    counters: FleetCounters(),
                    claimedTimers: claimed ? [key] : []
                )
                #expect(try await store.group { try await $0.write(write) })
                version += 1
            }
            try await write(deadline: t0 + .seconds(100), claimed: false)
            #expect(try await store.nextDeviceDeadline() == t0 + .seconds(100), "a new device's deadline is written")
            try await write(deadline: t0 + .seconds(200), claimed: false)
            #expect(try await store.nextDeviceDeadline() == t0 + .seconds(100), "a later one is not")
            try await write(deadline: nil, claimed: false)
            #expect(try await store.nextDeviceDeadline() == t0 + .seconds(100), "nor none")
            try await write(deadline: t0 + .seconds(50), claimed: false)
            #expect(try await store.nextDeviceDeadline() == t0 + .seconds(50), "an earlier one is")
            try await write(deadline: t0 + .seconds(300), claimed: true)
            #expect(try await store.nextDeviceDeadline() == t0 + .seconds(300), "a claimed timer's deadline is written as planned")
            try await write(deadline: nil, claimed: true)
            #expect(try await store.nextDeviceDeadline() == nil)

            // Writes that keep the deadline leave the indexed columns alone: PostgreSQL updates in place. (Other
            // backends report their counts within a second or so of going idle; longer on a loaded machine, so the
            // wait is bounded by tries, not by what a quiet one needs.)
            for _ in 0..<20 { try await write(deadline: t0 + .seconds(900), claimed: false) }
            var hot: (all: Int64, inPlace: Int64) = (0, 0)
            for _ in 0..<300 where hot.all < 25 {
                try await Task.sleep(for: .milliseconds(100))
                hot = try await store.withTransaction { connection in
                    var updates: (all: Int64, inPlace: Int64) = (0, 0)
                    for try await row in try await connection.query(
                        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'devices'",
                        logger: Logger(label: "test")
                    ).decode((Int64, Int64).self) {
                        updates = row
                    }
                    return updates
                }
            }
            #expect(hot.all == 25 && hot.inPlace >= 19, "in-place updates: \(hot.inPlace) of \(hot.all)")
        }
    }

    @Test("a write planned on a version another writer replaced is refused whole; concurrent writers of one device lose nothing")
    func optimisticWrites() async throws {
        try await withPostgresStore { store in
            let key = DeviceKey(appId: "app", deviceId: "new")
            func read() async throws -> StoredDevice? {
                try await store.group { try await $0.read(GroupRead(keys: [key], claims: [], now: t0, dueLimit: 0, containers: [])).devices.first }
            }
            // A stale write: planned on "not stored" after another writer stored the device.
            var first = StoreChanges(recordedAt: t0)
            first.devices = [DeviceRecord(key: key, firstSeenAt: t0)]
            let stored = try await store.group {
                try await $0.write(GroupWrite(changes: first, versions: [:], fleetAlertsRead: [:], counters: FleetCounters()))
            }
            #expect(stored)
            var stale = StoreChanges(recordedAt: t0)
            var record = DeviceRecord(key: key, firstSeenAt: t0)
            record.monitor.pendingChanges = 99
            stale.devices = [record]
            stale.outbox = [message("m-stale")]
            stale.eventIds = [(key, "e-stale")]
            var deltas = FleetCounters()
            deltas.replace(nil, with: record.fleetContribution(now: t0, configuration: AlertConfiguration()))
            let refused = try await store.group {
                try await $0.write(GroupWrite(changes: stale, versions: [key: 0], fleetAlertsRead: [:], counters: deltas))
            }
            #expect(!refused)
            #expect(try await read()?.record.monitor.pendingChanges == 0)
            #expect(try await store.counts(.all) == FleetCounts(), "no counter of the refused write")
            #expect(try await store.seenEventIds([(key, ["e-stale"])]) == [[]], "no event id of the refused write")
            #expect(try await store.dueMessages(now: t0, limit: 10).isEmpty, "no message of the refused write")

            // 20 concurrent read-modify-write loops on the device: each appends one pending change.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        var written = false
                        while !written {
                            written = try await store.group { g in
                                let found = try await g.read(GroupRead(keys: [key], claims: [], now: t0, dueLimit: 0, containers: [])).devices.first
                                var record = found?.record ?? DeviceRecord(key: key, firstSeenAt: t0)
                                record.monitor.pendingChanges += 1
                                var changes = StoreChanges(recordedAt: t0)
                                changes.devices = [record]
                                let write = GroupWrite(
                                    changes: changes,
                                    versions: [key: found?.version ?? 0],
                                    fleetAlertsRead: [:],
                                    counters: FleetCounters()
                                )
                                return try await g.write(write)
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await read()?.record.monitor.pendingChanges == 20)
            #expect(try await read()?.version == 21, "stored at 1, then one more a write")
        }
    }

    @Test("a fleet alert starts where none fires and ends only as read; a write that disagrees is refused")
    func fleetAlertGuards() async throws {
        try await withPostgresStore { store in
            func setFleet(_ container: String, startsAt: Timestamp?, read: [String: Timestamp]) async throws -> Bool {
                var changes = StoreChanges(recordedAt: t0)
                changes.fleetAlerts = [(container, startsAt)]
                return try await store.group {
                    try await $0.write(GroupWrite(changes: changes, versions: [:], fleetAlertsRead: read, counters: FleetCounters()))
                }
            }
            let fired = try await setFleet("c", startsAt: t0, read: [:])
            #expect(fired)
            let firedAgain = try await setFleet("c", startsAt: t0 + .seconds(1), read: [:])
            #expect(!firedAgain, "another replica fired it first")
            let endedOther = try await setFleet("c", startsAt: nil, read: ["c": t0 + .seconds(1)])
            #expect(!endedOther, "not the alert that was read")
            #expect(try await store.loadState().fleetAlerts == ["c": t0])
            let ended = try await setFleet("c", startsAt: nil, read: ["c": t0])
            #expect(ended)
            #expect(try await store.loadState().fleetAlerts.isEmpty)
        }
    }

    @Test("counters: each replica adds to its own shard, reads sum every shard, a dead replica's shard is folded without changing a sum")
    func counters() async throws {
        try await withPostgresStores(2) { stores in
            let broken = FleetContribution(appId: "a", containerId: "c", summary: .error, notSyncing: false, errorClass: .userAction, silent: false)
            let fine = FleetContribution(appId: "a", containerId: "c", summary: .succeeded, notSyncing: false, errorClass: nil, silent: false)
            func add(_ deltas: FleetCounters, on store: PostgresStore) async throws {
                let write = GroupWrite(changes: StoreChanges(recordedAt: t0), versions: [:], fleetAlertsRead: [:], counters: deltas)
                #expect(try await store.group { try await $0.write(write) })
            }
            var first = FleetCounters()
            first.replace(nil, with: broken)
            first.replace(nil, with: fine)
            try await add(first, on: stores[0])
            var second = FleetCounters()
            second.replace(broken, with: fine)
            try await add(second, on: stores[1])
            var reference = FleetCounters()
            reference.replace(nil, with: fine)
            reference.replace(nil, with: fine)
            for store in stores {
                #expect(try await store.counts(.all) == reference[.all])
                #expect(try await store.counts(FleetScope(appId: "a")) == reference[FleetScope(appId: "a")])
                #expect(try await store.counts(FleetScope(appId: "a", containerId: "c")).devices == 2)
                #expect(try await store.counts(FleetScope(appId: "other")) == FleetCounts())
                #expect(try await store.allCounts()[FleetScope(containerId: "c")] == reference[FleetScope(containerId: "c")])
                let read = try await store.group {
                    try await $0.read(GroupRead(keys: [], claims: [], now: t0, dueLimit: 0, containers: ["c", "empty"]))
                }
                #expect(read.counts["c"] == reference[FleetScope(containerId: "c")])
                #expect(read.counts["empty"] == FleetCounts())
            }
            // Replica 1 beat long ago and is gone; replica 0 folds its shard.
            try await stores[1].heartbeat(now: t0, deadBefore: t0 - .seconds(1))
            try await stores[0].heartbeat(now: t0 + .seconds(3600), deadBefore: t0 + .seconds(1))
            #expect(try await stores[0].counts(.all) == reference[.all])
            #expect(try await stores[0].counts(FleetScope(containerId: "c")) == reference[FleetScope(containerId: "c")])
            let shards = try await stores[0].withTransaction { connection in
                var out: [Int64] = []
                for try await shard in try await connection.query(
                    "SELECT DISTINCT shard FROM fleet_counters ORDER BY shard",
                    logger: Logger(label: "test")
                )
                .decode(Int64.self) {
                    out.append(shard)
                }
                return out
            }
            #expect(shards == [0, stores[0].shard], "the dead replica's rows moved to shard 0")
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
    @Test("preparing again changes nothing; a newer release's schema is used if its unknown migrations only add, else refused; never altered")
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
            // The same migration marked as only adding: a replica of the release before runs on it (a rolling upgrade).
            try await store.withTransaction { connection in
                try await connection.query(
                    "UPDATE synchealth_migrations SET additive = TRUE WHERE version = \(future)",
                    logger: Logger(label: "test")
                )
            }
            try await store.prepare()
            #expect(try await versions() == Array(1...future), "and leaves the schema alone")
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
