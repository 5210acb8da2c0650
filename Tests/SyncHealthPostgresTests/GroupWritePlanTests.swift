import Logging
import PostgresNIO
import SyncHealthCore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthPostgres
@testable import SyncHealthStore

/// A connection keeps the plans of `synchealth_write_group`'s statements for its life. Planned on a new database,
/// with the tables nearly empty and never analysed, a join of the group's arrays with `devices` or `alerts` comes
/// out as a scan of the whole table, and each write then costs as much as the fleet is large.
@Suite("PostgreSQL group write: plans", .enabled(if: PostgresTesting.baseURL != nil))
struct GroupWritePlanTests {
    @Test("a group's write and read probe devices, alerts and event ids by key, even under plans made while the tables were empty")
    func groupProbesByKey() async throws {
        try await withPostgresStore { store in
            let (d1, d2) = (DeviceKey(appId: "com.example", deviceId: "d1"), DeviceKey(appId: "com.example", deviceId: "d2"))
            let d3 = DeviceKey(appId: "com.example", deviceId: "d3")
            var first = StoreChanges(recordedAt: t0)
            first.devices = [richRecord("d1"), richRecord("d2"), richRecord("d3")]
            first.alerts = [alert("a2", .syncError, .firing, device: "d2")]
            first.eventIds = [(d1, "e1"), (d3, "e3")]
            let stored = try await store.group {
                try await $0.write(GroupWrite(changes: first, versions: [:], fleetAlertsRead: [:], counters: FleetCounters()))
            }
            #expect(stored)

            // d1 as stored (version 1) written again, d2 erased with its alert.
            var next = StoreChanges(recordedAt: t0 + .seconds(1))
            var record = richRecord("d1")
            record.monitor.pendingChanges = 7
            next.devices = [record]
            next.removals = [DeviceRemoval(key: d2, reason: .erased)]
            let write = GroupWrite(changes: next, versions: [d1: 1, d2: 1], fleetAlertsRead: [:], counters: FleetCounters())
            let logger = Logger(label: "test")
            let scans = try await store.withTransaction { connection in
                // The view holds the connection's counts not yet reported, earlier transactions' included: a difference.
                func counts() async throws -> [String: Int64] {
                    var counts: [String: Int64] = [:]
                    let rows = try await connection.query(
                        "SELECT relname::text, seq_scan FROM pg_stat_xact_user_tables WHERE relname IN ('devices', 'alerts', 'seen_events')",
                        logger: logger
                    )
                    for try await (table, count) in rows.decode((String, Int64).self) { counts[table] = count }
                    return counts
                }
                // A generic plan is what a connection settles on after five calls; forced here at the first.
                try await connection.query("SET LOCAL plan_cache_mode = force_generic_plan", logger: logger)
                let before = try await counts()
                try await PostgresGroup.write(write, shard: 0, on: connection, logger: logger)
                // The next group's read: two devices, their event ids, the due timers.
                let group = PostgresGroup(connection: connection, logger: logger, shard: 0, timerLease: .seconds(30), loadWebhooks: { [] })
                let claims: [EventIdClaim] = [(d1, ["e1", "e2"]), (d3, ["e3"])]
                let snapshot = try await group.read(
                    GroupRead(keys: [d1, d3], claims: claims, now: t0 + .seconds(100_000), dueLimit: 10, containers: ["iCloud.x"])
                )
                #expect(snapshot.seen == [["e1"], ["e3"]])
                return try await counts().merging(before) { after, before in after - before }
            }
            #expect(
                scans["devices"] == 0 && scans["alerts"] == 0 && scans["seen_events"] == 0,
                "sequential scans in the write and the read: \(scans)"
            )

            // And the write did what it says.
            let read = try await store.group {
                try await $0.read(GroupRead(keys: [d1, d2], claims: [], now: t0, dueLimit: 0, containers: []))
            }
            #expect(read.devices.map(\.record.key) == [d1])
            #expect(read.devices.first?.record.monitor.pendingChanges == 7)
            #expect(read.devices.first?.version == 2)
            #expect(try await store.alerts(ids: ["a2"]).isEmpty, "the erased device's alert went with it")
        }
    }
}
