import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthPostgres
import SyncHealthSQLite
import SyncHealthStore
import SyncHealthTestSupport
import Synchronization
import Testing

@testable import SyncHealthServer

/// `curl -N` reading a Server-Sent Events stream, as a real client would: what arrives is kept, parsed.
final class StreamReader: @unchecked Sendable {
    let process = Process()
    private let output = Pipe()
    let received = LogBuffer()

    init(port: Int, key: String, lastEventId: String? = nil) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        var arguments = ["curl", "-sN", "--max-time", "60", "-H", "Authorization: Bearer \(key)"]
        if let lastEventId { arguments += ["-H", "Last-Event-ID: \(lastEventId)"] }
        process.arguments = arguments + ["http://127.0.0.1:\(port)/v1/stream"]
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        received.drain(output.fileHandleForReading)
    }

    /// The events received so far: (event, id, data).
    var events: [(event: String, id: String?, data: String)] {
        received.text.withLock { $0 }.components(separatedBy: "\n\n").compactMap { block in
            var name: String?
            var id: String?
            var data = ""
            for line in block.split(separator: "\n") {
                if line.hasPrefix("event: ") { name = String(line.dropFirst(7)) }
                if line.hasPrefix("id: ") { id = String(line.dropFirst(4)) }
                if line.hasPrefix("data: ") { data = String(line.dropFirst(6)) }
            }
            return name.map { ($0, id, data) }
        }
    }

    /// The alert events so far, as (id of the event, alert id, state).
    var alerts: [(eventId: String, alertId: String, deviceId: String, state: String)] {
        events.filter { $0.event == "alert" }.compactMap { e in
            guard let object = try? JSONSerialization.jsonObject(with: Data(e.data.utf8)) as? [String: Any] else { return nil }
            return (e.id ?? "", object["id"] as? String ?? "", object["deviceId"] as? String ?? "", object["state"] as? String ?? "")
        }
    }

    /// Kills curl. SIGKILL, since a test process that runs a ServiceGroup ignores SIGTERM, and children inherit that.
    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

@Suite("The live stream over real HTTP", .serialized)
struct StreamTests {
    static func fire(_ client: some TestClientProtocol, device: String) async throws {
        let events = [event("n", #""kind": "network", "available": true"#), event("f", "2026-11-22T10:00:01Z", urgentError)]
        #expect(try await client.post(batch(device: device, events)).status == .accepted)
    }

    @Test("alerts arrive as they fire; a reconnect with Last-Event-ID gets what it missed, none lost or repeated")
    func resumeAfterReconnect() async throws {
        let service = TestService()
        try await service.test(.live) { client in
            let port = try #require(client.port)
            let first = try StreamReader(port: port, key: readKey)
            defer { first.stop() }
            #expect(try await eventually { first.received.text.withLock { $0.contains(": connected") } })
            try await Self.fire(client, device: "dev-1")
            #expect(try await eventually { first.alerts.count == 1 })
            let seen = first.alerts
            #expect(seen.map(\.deviceId) == ["dev-1"])
            first.stop()

            // Away: two more transitions. Then back, from the last id seen.
            try await Self.fire(client, device: "dev-2")
            try await Self.fire(client, device: "dev-3")
            let second = try StreamReader(port: port, key: readKey, lastEventId: seen[0].eventId)
            defer { second.stop() }
            #expect(try await eventually { second.alerts.count == 2 })
            try await Self.fire(client, device: "dev-4")
            #expect(try await eventually { second.alerts.count == 3 })
            let resumed = second.alerts
            #expect(resumed.map(\.deviceId) == ["dev-2", "dev-3", "dev-4"])
            #expect(Set(resumed.map(\.eventId)).count == 3 && !resumed.map(\.eventId).contains(seen[0].eventId))
            #expect(!second.events.contains { $0.event == "reset" })

            // A summary of every scope when the stream opens, and the changes once a second.
            #expect(second.events.contains { $0.event == "summary" })
            let before = second.events.filter { $0.event == "summary" }.count
            try await Self.fire(client, device: "dev-5")
            service.clock.advance(by: .seconds(1))
            #expect(try await eventually { second.events.filter { $0.event == "summary" }.count > before })
            let last = try #require(second.events.last { $0.event == "summary" })
            #expect(last.data.contains(#""devices":5"#))
        }
    }

    @Test("on the embedded store, a reader resumes after a restart from the id it last saw, with no loss or repeat")
    func resumeAfterRestart() async throws {
        let dir = temporaryDirectory()
        let lastSeen = Mutex<String?>(nil)
        try await TestService(store: .local(try SQLiteStore(directory: dir, synchronous: .normal))).test(.live) { client in
            let port = try #require(client.port)
            let reader = try StreamReader(port: port, key: readKey)
            defer { reader.stop() }
            #expect(try await eventually { reader.received.text.withLock { $0.contains(": connected") } })
            for device in ["dev-1", "dev-2"] { try await Self.fire(client, device: device) }
            #expect(try await eventually { reader.alerts.count == 2 })
            lastSeen.withLock { $0 = reader.alerts.first?.eventId }
        }
        try await TestService(store: .local(try SQLiteStore(directory: dir, synchronous: .normal))).test(.live) { client in
            let port = try #require(client.port)
            try await Self.fire(client, device: "dev-3")
            let reader = try StreamReader(port: port, key: readKey, lastEventId: lastSeen.withLock { $0 })
            defer { reader.stop() }
            #expect(try await eventually { reader.alerts.count == 2 })
            #expect(reader.alerts.map(\.deviceId) == ["dev-2", "dev-3"])
            #expect(!reader.events.contains { $0.event == "reset" }, "resumed, not reset")
        }
    }

    @Test("an unknown id gets reset; the stream needs a read key")
    func resetAndAuth() async throws {
        let service = TestService()
        try await service.test(.live) { client in
            let port = try #require(client.port)
            let reader = try StreamReader(port: port, key: readKey, lastEventId: "old-7")
            defer { reader.stop() }
            #expect(try await eventually { reader.events.contains { $0.event == "reset" } })
            #expect(try await client.get("/v1/stream", key: ingestKey).status == .forbidden)
            #expect(try await client.get("/v1/stream", key: nil).status == .unauthorized)
        }
    }

    @Test("graceful shutdown ends open streams instead of waiting for them")
    func shutdownEndsStreams() async throws {
        let service = TestService()
        let reader = Mutex<StreamReader?>(nil)
        let started = ContinuousClock.now
        try await service.test(.live) { client in
            let port = try #require(client.port)
            let r = try StreamReader(port: port, key: readKey)
            reader.withLock { $0 = r }
            #expect(try await eventually { r.received.text.withLock { $0.contains(": connected") } })
        }
        // The test framework shut the server down; curl sees the stream end long before its own 60 s limit.
        let r = try #require(reader.withLock { $0 })
        #expect(try await eventually { !r.process.isRunning })
        r.stop()
        #expect(ContinuousClock.now - started < .seconds(30))
    }

    /// Makes a read key through the API; its id and secret.
    static func makeReadKey(_ client: some TestClientProtocol, expiresAt: Timestamp? = nil) async throws -> (id: String, secret: String) {
        let body = expiresAt.map { #"{"role": "read", "expiresAt": "\#($0.rfc3339)"}"# } ?? #"{"role": "read"}"#
        let made = try json(try await client.execute(uri: "/v1/keys", method: .post, headers: headers(adminKey), body: ByteBuffer(string: body)))
        return (made["id"] as? String ?? "", made["key"] as? String ?? "")
    }

    /// Whether `reader`'s stream ended (curl exited) within `limit`.
    static func ends(_ reader: StreamReader, within limit: Duration) async throws -> Bool {
        try await eventually(tries: Int(limit / .milliseconds(50)), every: .milliseconds(50)) { !reader.process.isRunning }
    }

    @Test("a stream ends within a second of its key's revocation, and when its key expires; another key's stream goes on")
    func revokedAndExpiredKeysEndStreams() async throws {
        let service = TestService()
        try await service.test(.live) { client in
            let port = try #require(client.port)
            let revoked = try await Self.makeReadKey(client)
            let expiring = try await Self.makeReadKey(client, expiresAt: testStart + .seconds(60))
            let readers = try [revoked.secret, expiring.secret, readKey].map { try StreamReader(port: port, key: $0) }
            defer {
                for reader in readers { reader.stop() }
            }
            for reader in readers { #expect(try await eventually { reader.received.text.withLock { $0.contains(": connected") } }) }

            let deleted = try await client.execute(uri: "/v1/keys/\(revoked.id)", method: .delete, headers: headers(adminKey))
            #expect(deleted.status == .noContent)
            #expect(try await Self.ends(readers[0], within: .seconds(1)), "revoked")
            #expect(readers[1].process.isRunning && readers[2].process.isRunning)

            service.clock.advance(by: .seconds(61))
            #expect(try await Self.ends(readers[1], within: .seconds(1)), "expired")
            try await Self.fire(client, device: "still-heard")
            #expect(try await eventually { readers[2].alerts.count == 1 }, "the configured key's stream goes on")
            #expect(readers[2].process.isRunning)
        }
    }

    @Test("a stream ends at its maximum life; the reader reconnects with Last-Event-ID and misses nothing")
    func maximumLife() async throws {
        let service = TestService(streamLife: .seconds(3))
        try await service.test(.live) { client in
            let port = try #require(client.port)
            let reader = try StreamReader(port: port, key: readKey)
            defer { reader.stop() }
            #expect(try await eventually { reader.received.text.withLock { $0.contains(": connected") } })
            try await Self.fire(client, device: "before")
            #expect(try await eventually { reader.alerts.count == 1 })
            #expect(try await Self.ends(reader, within: .seconds(5)))
            try await Self.fire(client, device: "meanwhile")
            let again = try StreamReader(port: port, key: readKey, lastEventId: reader.alerts.last?.eventId)
            defer { again.stop() }
            #expect(try await eventually { again.alerts.map(\.deviceId) == ["meanwhile"] })
        }
    }
}

@Suite("The live stream in a storm, over real HTTP", .serialized)
struct StreamStormTests {
    /// The whole fleet's counts in the last `summary` event that has them.
    static func lastFleetSummary(_ reader: StreamReader) -> [String: Any]? {
        for e in reader.events.reversed() where e.event == "summary" {
            guard let body = try? JSONSerialization.jsonObject(with: Data(e.data.utf8)) as? [String: Any],
                let scopes = body["data"] as? [[String: Any]]
            else { continue }
            if let fleet = scopes.first(where: { $0["appId"] is NSNull && $0["containerId"] is NSNull }) { return fleet }
        }
        return nil
    }

    @Test("10,000 transitions, 20 readers, one never reading: ingestion goes on, and every reader ends with /v1/summary's counts after a reset")
    func storm() async throws {
        let service = TestService()
        try await service.test(.live) { client in
            let port = try #require(client.port)
            let readers = try (0..<19).map { _ in try StreamReader(port: port, key: readKey) }
            let stuck = try StreamReader(port: port, key: readKey)
            defer {
                kill(stuck.process.processIdentifier, SIGCONT)
                stuck.stop()
                for r in readers { r.stop() }
            }
            for r in readers + [stuck] { #expect(try await eventually { r.received.text.withLock { $0.contains(": connected") } }) }
            kill(stuck.process.processIdentifier, SIGSTOP)

            // 5,000 devices break and then recover: 10,000 transitions, a tick every 1,000.
            let devices = 5_000
            for phase in 0..<2 {
                for start in stride(from: 0, to: devices, by: 1_000) {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for worker in 0..<8 {
                            group.addTask {
                                for i in stride(from: start + worker, to: start + 1_000, by: 8) {
                                    let body =
                                        phase == 0
                                        ? [event("n", #""kind": "network", "available": true"#), event("f", "2026-11-22T10:00:01Z", urgentError)]
                                        : [event("s", "2026-11-22T10:00:05Z", #""kind": "activity", "phase": "export", "state": "succeeded""#)]
                                    let response = try await client.post(batch(device: "d\(i)", body))
                                    #expect(response.status == .accepted)
                                }
                            }
                        }
                        try await group.waitForAll()
                    }
                    service.clock.advance(by: .seconds(1))
                }
            }
            // Quiet ticks (each returns once the ticker has run): the last summaries, then the reset. A tick resets
            // the coalesced readers when the tick before it was calm; on a busy machine the storm's last transitions
            // can still reach the feed during the first quiet tick, and only a later one is calm.
            for quiet in 1...10 {
                try await service.clock.advanceAndSettle(by: .seconds(1))
                guard quiet >= 2 else { continue }
                if try await eventually(tries: 100, { readers.allSatisfy { r in r.events.contains { $0.event == "reset" } } }) { break }
            }
            let summary = try json(try await client.get("/v1/summary"))
            #expect(summary["devices"] as? Int == devices)
            let firing = try json(try await client.get("/v1/alerts?state=firing&kind=syncError"))
            #expect((firing["data"] as? [Any])?.isEmpty == true, "every device broke and recovered: 10,000 transitions")
            for r in readers {
                #expect(try await eventually { r.events.contains { $0.event == "reset" } }, "a reset once the storm is over")
                #expect(try await eventually { Self.lastFleetSummary(r)?["devices"] as? Int == devices })
                let fleet = Self.lastFleetSummary(r)
                for field in ["devices", "active", "broken", "notSyncing", "silent"] {
                    #expect(fleet?[field] as? Int == summary[field] as? Int, "\(field): the stream's last summary is /v1/summary's")
                }
                #expect(r.alerts.count < 1_000, "coalesced: \(r.alerts.count) of 10,000 transitions sent")
            }
            #expect(service.engine.feed.subscriberCount == 20, "the reader that never reads was not cut off: it holds little")
        }
    }
}

@Suite("One stream across PostgreSQL replicas", .serialized, .enabled(if: PostgresTesting.baseURL != nil))
struct SharedStreamTests {
    @Test(
        "a stream on A ends within a second of its key's revocation on B",
        .enabled(if: PostgresTesting.baseURL != nil)
    )
    func revocationAcrossReplicas() async throws {
        let url = try await PostgresTesting.freshDatabase()
        let clock = ManualClock(testStart)
        let a = TestService(store: .shared(try PostgresStore(url: url, logger: testLogger())), clock: clock)
        let b = TestService(store: .shared(try PostgresStore(url: url, logger: testLogger())), clock: clock)
        try await a.test(.live) { clientA in
            try await b.test { clientB in
                let port = try #require(clientA.port)
                let key = try await StreamTests.makeReadKey(clientB)
                // A reads stored keys every 500 ms: the key made on B works on A within a second.
                #expect(try await eventually { try await clientA.get("/v1/keys/current", key: key.secret).status == .ok })
                let reader = try StreamReader(port: port, key: key.secret)
                defer { reader.stop() }
                #expect(try await eventually { reader.received.text.withLock { $0.contains(": connected") } })
                let revoked = try await clientB.execute(uri: "/v1/keys/\(key.id)", method: .delete, headers: headers(adminKey))
                #expect(revoked.status == .noContent)
                #expect(try await StreamTests.ends(reader, within: .seconds(1.5)), "the revocation's second, and the check's quarter")
            }
        }
    }

    @Test("a stream on A carries every replica's transitions, each once; after A restarts, Last-Event-ID resumes with no loss or repeat")
    func acrossReplicasAndARestart() async throws {
        let url = try await PostgresTesting.freshDatabase()
        let clock = ManualClock(testStart)
        @Sendable func replica() throws -> TestService {
            TestService(store: .shared(try PostgresStore(url: url, logger: testLogger())), clock: clock)
        }
        let lastSeen = Mutex<String?>(nil)
        let (a, b) = (try replica(), try replica())
        try await a.test(.live) { clientA in
            try await b.test { clientB in
                let port = try #require(clientA.port)
                // A follows the database once it has read the last transitions: from then on nothing is missed.
                #expect(try await eventually { a.engine.feed.rebuilds > 0 })
                let reader = try StreamReader(port: port, key: readKey)
                defer { reader.stop() }
                #expect(try await eventually { reader.received.text.withLock { $0.contains(": connected") } })
                for i in 0..<5 { try await StreamTests.fire(clientB, device: "b-\(i)") }
                try await StreamTests.fire(clientA, device: "a-0")
                #expect(try await eventually { reader.alerts.count >= 6 })
                try await Task.sleep(for: .milliseconds(200))
                let alerts = reader.alerts
                try #require(alerts.count == 6)
                #expect(alerts.map(\.deviceId) == ["b-0", "b-1", "b-2", "b-3", "b-4", "a-0"], "in commit order, B's through A")
                #expect(Set(alerts.map(\.eventId)).count == 6, "each once, A's own included")
                #expect(alerts.allSatisfy { $0.eventId == $0.alertId + ".f" }, "durable ids: the alert's and the transition's")
                lastSeen.withLock { $0 = alerts[2].eventId }
            }
        }
        // A stopped; while it is down, B fires two more. Then A starts again, and a reader resumes from b-2's fire.
        try await replica().test { clientB in
            try await StreamTests.fire(clientB, device: "b-5")
            try await StreamTests.fire(clientB, device: "b-6")
        }
        let restarted = try replica()
        try await restarted.test(.live) { clientA in
            let port = try #require(clientA.port)
            #expect(try await eventually { restarted.engine.feed.rebuilds > 0 })
            let reader = try StreamReader(port: port, key: readKey, lastEventId: lastSeen.withLock { $0 })
            defer { reader.stop() }
            #expect(try await eventually { reader.alerts.count >= 5 })
            try await Task.sleep(for: .milliseconds(200))
            #expect(reader.alerts.map(\.deviceId) == ["b-3", "b-4", "a-0", "b-5", "b-6"])
            #expect(!reader.events.contains { $0.event == "reset" }, "resumed, not reset")
        }
    }
}
