import Foundation
import PostgresNIO
import SyncHealthCore
import SyncHealthEngineTesting
import SyncHealthTestSupport
import Synchronization
import Testing

/// Watches one database for lock waits, the way an operator would: `pg_locks` sampled every few milliseconds, and
/// the server's own log of waits longer than `deadlock_timeout` (set to 1 ms for this database).
///
/// Waits for the relation extension lock are left out of both. That lock is held only while a backend adds a page
/// to a table's file, and two inserts of different rows meet on it whenever both need a new page at once: it is
/// the storage's, not one commit waiting on another's rows, and no design of ours removes it.
final class LockWaitWatcher: Sendable {
    let url: String
    let database: String
    /// Waiting backends seen in `pg_locks`, with the statement each was running.
    let sampled = Mutex<[String]>([])
    /// Every backend of the database seen while watching.
    let backends = Mutex<Set<String>>([])
    let logPath: String?
    let logStart: UInt64

    init(url: String) async throws {
        self.url = url
        database = URLComponents(string: url).map { String($0.path.dropFirst()) } ?? ""
        // The database name is generated from hex digits (PostgresTesting.freshDatabase).
        try await PostgresTesting.execute(
            [
                "ALTER DATABASE \(database) SET log_lock_waits = on", "ALTER DATABASE \(database) SET deadlock_timeout = '1ms'",
                // The wait's statement is logged with it.
                "ALTER DATABASE \(database) SET log_min_error_statement = log",
            ],
            on: url
        )
        let path = ProcessInfo.processInfo.environment["SYNCHEALTH_TEST_POSTGRES_DIR"].map { $0 + "/log" }
        logPath = path.flatMap { FileManager.default.isReadableFile(atPath: $0) ? $0 : nil }
        logStart = logPath.flatMap { (try? FileManager.default.attributesOfItem(atPath: $0))?[.size] as? UInt64 } ?? 0
    }

    /// Samples until cancelled.
    func sample() async throws {
        let connection = try await PostgresTesting.connection(to: url)
        defer { Task { try? await connection.close() } }
        while !Task.isCancelled {
            let waiting = try await PostgresTesting.strings(
                """
                SELECT l.pid::text || ' ' || l.locktype || ' ' || coalesce(a.query, '') FROM pg_locks l
                JOIN pg_stat_activity a ON a.pid = l.pid
                WHERE NOT l.granted AND l.locktype <> 'extend' AND a.datname = current_database()
                """,
                on: connection
            )
            let pids = try await PostgresTesting.strings("SELECT pid::text FROM pg_stat_activity WHERE datname = current_database()", on: connection)
            backends.withLock { $0.formUnion(pids) }
            if !waiting.isEmpty { sampled.withLock { $0 += waiting } }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    /// The server log's lock waits of this database's backends since the watcher started, each with the statement
    /// that waited; `nil` when the log cannot be read here.
    func loggedWaits() -> [String]? {
        guard let logPath, let handle = FileHandle(forReadingAtPath: logPath) else { return nil }
        defer { try? handle.close() }
        try? handle.seek(toOffset: logStart)
        let text = String(decoding: (try? handle.readToEnd()) ?? Data(), as: UTF8.self)
        let ours = backends.withLock { $0 }
        var waits: [String] = []
        var waitingPids: Set<String> = []
        // Lines look like `2026-11-25 10:47:18.442 UTC [23409] LOG:  process 23409 still waiting for ...`, and the
        // statement follows on a `STATEMENT:` line of the same process.
        for line in text.split(separator: "\n") {
            guard let open = line.firstIndex(of: "["), let close = line[open...].firstIndex(of: "]") else { continue }
            let pid = String(line[line.index(after: open)..<close])
            guard ours.contains(pid) else { continue }
            if line.contains("still waiting for"), !line.contains(" on extension of relation ") {
                waitingPids.insert(pid)
            } else if line.contains("STATEMENT:"), waitingPids.remove(pid) != nil {
                waits.append(String(line))
            }
        }
        return waits
    }
}

@Suite("Replicas scale: no lock waits between replicas, few round trips, the same answers", .serialized, .enabled(if: PostgresTesting.baseURL != nil))
struct ReplicaScalingTests {
    static let environment = [
        "SYNCHEALTH_INGEST_KEYS": "ingest-0123456789abcdefghijklmnop", "SYNCHEALTH_READ_KEYS": "read-0123456789abcdefghijklmnop",
        "SYNCHEALTH_DEVICE_RATE_LIMIT": "off",
        "SYNCHEALTH_KEY_RATE_LIMIT": "off",
    ]

    /// Posts `count` single-event batches, one at a time, spread over `devices`.
    static func post(_ count: Int, devices: [String], to server: LiveServer) async throws -> Int {
        var acknowledged = 0
        for i in 0..<count {
            let id = devices[i % devices.count]
            let at = Timestamp(seconds: Date().timeIntervalSince1970)
            let body =
                #"{"device": {"deviceId": "\#(id)", "appId": "com.scale", "containerId": "iCloud.scale"}, "events": [{"eventId": "\#(id)-\#(i)", "occurredAt": "\#(at.rfc3339)", "kind": "heartbeat"}]}"#
            if try await server.request("POST", "/v1/events", key: "ingest-0123456789abcdefghijklmnop", body: Data(body.utf8)).status == 202 {
                acknowledged += 1
            }
        }
        return acknowledged
    }

    /// The round-trip histogram's observations at most 3, and all of them, from a replica's `/metrics`.
    static func roundTrips(_ server: LiveServer) async throws -> (atMost3: Int, total: Int) {
        let text = String(decoding: try await server.request("GET", "/metrics").body, as: UTF8.self)
        func value(_ prefix: String) -> Int {
            text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { $0.split(separator: " ").last }.flatMap { Double($0) }.map {
                Int($0)
            } ?? -1
        }
        return (value(#"synchealth_postgres_round_trips_per_group_bucket{le="3"#), value("synchealth_postgres_round_trips_per_group_count"))
    }

    @Test(
        "two replicas loaded at once on different devices: PostgreSQL saw no lock wait between their commits, every group took at most 3 round trips, and both answer alike as soon as a post is acknowledged"
    )
    func noWaitsBetweenReplicas() async throws {
        let url = try await PostgresTesting.freshDatabase()
        let watcher = try await LockWaitWatcher(url: url)
        var environment = Self.environment
        environment["SYNCHEALTH_DATABASE_URL"] = url
        let a = try LiveServer(environment: environment)
        let b = try LiveServer(environment: environment)
        for server in [a, b] { #expect(try await eventually { try await server.request("GET", "/readyz").status == 200 }) }

        let posters = 8
        let perPoster = 150
        let acknowledged = try await withThrowingTaskGroup(of: Int.self) { group in
            group.addTask {
                try await watcher.sample()
                return 0
            }
            let load = Task {
                try await withThrowingTaskGroup(of: Int.self) { posts in
                    for (name, server) in [("a", a), ("b", b)] {
                        for p in 0..<posters {
                            posts.addTask { try await Self.post(perPoster, devices: (0..<4).map { "\(name)-\(p)-\($0)" }, to: server) }
                        }
                    }
                    return try await posts.reduce(0, +)
                }
            }
            let total = try await load.value
            group.cancelAll()
            return total
        }
        #expect(acknowledged == 2 * posters * perPoster)

        // The commits' statements never waited; other waits (none expected) are listed too.
        let sampled = watcher.sampled.withLock { $0 }
        #expect(sampled.filter { $0.contains("synchealth_") }.isEmpty, "commits waited on locks: \(sampled.prefix(5))")
        if let logged = watcher.loggedWaits() {
            #expect(logged.filter { $0.contains("synchealth_") }.isEmpty, "the server log has lock waits of commits: \(logged.prefix(5))")
        }

        // Round trips, from each replica's /metrics.
        for server in [a, b] {
            let trips = try await Self.roundTrips(server)
            #expect(trips.total > 0, "no group recorded its round trips")
            #expect(trips.atMost3 == trips.total, "groups with more than 3 round trips: \(trips.total - trips.atMost3) of \(trips.total)")
        }

        // Converged: a post acknowledged by one replica reads the same on the other at once.
        for i in 0..<5 {
            #expect(try await Self.post(1, devices: ["fresh-\(i)"], to: a) == 1)
            let onA = try await a.request("GET", "/v1/devices/fresh-\(i)?appId=com.scale", key: "read-0123456789abcdefghijklmnop")
            let onB = try await b.request("GET", "/v1/devices/fresh-\(i)?appId=com.scale", key: "read-0123456789abcdefghijklmnop")
            #expect(onB.status == 200 && onA.body == onB.body)
        }
        let summaryA = try await a.request("GET", "/v1/summary", key: "read-0123456789abcdefghijklmnop")
        let summaryB = try await b.request("GET", "/v1/summary", key: "read-0123456789abcdefghijklmnop")
        func counts(_ body: Data) throws -> NSDictionary? {
            // generatedAt is each replica's clock.
            let json = try JSONSerialization.jsonObject(with: body) as? [String: Any]
            return json.map { $0.filter { $0.key != "generatedAt" } as NSDictionary }
        }
        #expect(try counts(summaryB.body)?["devices"] as? Int == 2 * posters * 4 + 5)
        #expect(try counts(summaryA.body) == counts(summaryB.body))
        #expect(a.stop() == 0)
        #expect(b.stop() == 0)
    }

    @Test("a container's devices break through both replicas at once: one fleetDegraded incident, fired and resolved once, delivered once each")
    func fleetAlertOnceAcrossReplicas() async throws {
        let url = try await PostgresTesting.freshDatabase()
        let receiver = TestReceiver()
        try await withReceiver(receiver) { port in
            var environment = Self.environment
            environment["SYNCHEALTH_DATABASE_URL"] = url
            environment["SYNCHEALTH_ADMIN_KEYS"] = "admin-0123456789abcdefghijklmnop"
            environment["SYNCHEALTH_ERROR_AFTER"] = "1s"
            environment["SYNCHEALTH_WEBHOOK_ALLOW_PRIVATE"] = "1"
            let a = try LiveServer(environment: environment)
            let b = try LiveServer(environment: environment)
            for server in [a, b] { #expect(try await eventually { try await server.request("GET", "/readyz").status == 200 }) }
            let hook = try await a.request(
                "POST",
                "/v1/webhooks",
                key: "admin-0123456789abcdefghijklmnop",
                body: Data(#"{"url": "http://127.0.0.1:\#(port)/hook", "kinds": ["fleetDegraded"]}"#.utf8)
            )
            #expect(hook.status == 201)
            let post: @Sendable (String, [String], LiveServer) async throws -> Void = { id, events, server in
                let body =
                    #"{"device": {"deviceId": "\#(id)", "appId": "com.fleet", "containerId": "iCloud.fleet"}, "events": [\#(events.joined(separator: ","))]}"#
                let status = try await server.request("POST", "/v1/events", key: "ingest-0123456789abcdefghijklmnop", body: Data(body.utf8)).status
                #expect(status == 202)
            }
            // 24 healthy devices, half through each replica; then 6 break at once, 3 through each (25% > 10%).
            let now: @Sendable () -> Timestamp = { Timestamp(seconds: Date().timeIntervalSince1970) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<24 {
                    group.addTask { try await post("f\(i)", recoveryEvents("f\(i)", at: now()), i % 2 == 0 ? a : b) }
                }
                try await group.waitForAll()
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<6 {
                    group.addTask { try await post("f\(i)", breakingEvents("f\(i)", at: now()), i % 2 == 0 ? a : b) }
                }
                try await group.waitForAll()
            }
            func fleetAlerts(_ server: LiveServer) async throws -> [[String: Any]] {
                let page = try await server.request("GET", "/v1/alerts?kind=fleetDegraded&limit=50", key: "read-0123456789abcdefghijklmnop")
                return (try JSONSerialization.jsonObject(with: page.body) as? [String: Any])?["data"] as? [[String: Any]] ?? []
            }
            #expect(try await eventually { try await fleetAlerts(b).contains { $0["state"] as? String == "firing" } }, "the fleet alert never fired")
            // The breaking devices recover, through the other replica this time.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<6 {
                    group.addTask { try await post("f\(i)", recoveryEvents("f\(i)-again", at: now()), i % 2 == 0 ? b : a) }
                }
                try await group.waitForAll()
            }
            #expect(try await eventually { try await fleetAlerts(a).allSatisfy { $0["state"] as? String == "resolved" } })
            let alerts = try await fleetAlerts(a)
            #expect(alerts.count == 1, "one incident: \(alerts.map { $0["id"] ?? "?" })")
            let delivered = { receiver.all.map { ($0.alert["id"] as? String ?? "?") + " " + ($0.type ?? "?") } }
            #expect(try await eventually { delivered().count >= 2 })
            // A second fire or resolve would arrive within a poll interval or two.
            try await Task.sleep(for: .milliseconds(600))
            let id = alerts.first?["id"] as? String ?? "?"
            #expect(delivered().sorted() == [id + " alert.firing", id + " alert.resolved"])
            #expect(a.stop() == 0)
            #expect(b.stop() == 0)
        }
    }

    @Test("the lock-wait watcher sees a wait when there is one (two sessions updating one row)")
    func watcherSeesAWait() async throws {
        let url = try await PostgresTesting.freshDatabase()
        try await PostgresTesting.execute(
            ["CREATE TABLE contended (id INTEGER PRIMARY KEY, n INTEGER)", "INSERT INTO contended VALUES (1, 0)"],
            on: url
        )
        let watcher = try await LockWaitWatcher(url: url)
        let holder = try await PostgresTesting.connection(to: url)
        let waiter = try await PostgresTesting.connection(to: url)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await watcher.sample() }
            try await holder.query("BEGIN", logger: .init(label: "test"))
            try await holder.query("UPDATE contended SET n = n + 1 WHERE id = 1", logger: .init(label: "test"))
            let blocked = Task {
                try await waiter.query("UPDATE contended SET n = n + 1 WHERE id = 1 /* synchealth_control */", logger: .init(label: "test"))
            }
            try await Task.sleep(for: .milliseconds(300))
            try await holder.query("COMMIT", logger: .init(label: "test"))
            try await blocked.value
            try await Task.sleep(for: .milliseconds(50))
            group.cancelAll()
        }
        try await holder.close()
        try await waiter.close()
        #expect(watcher.sampled.withLock { $0 }.contains { $0.contains("synchealth_control") })
        if let logged = watcher.loggedWaits() { #expect(logged.contains { $0.contains("synchealth_control") }) }
    }
}
