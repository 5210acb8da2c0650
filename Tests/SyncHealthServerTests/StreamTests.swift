import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncHealthCore
import SyncHealthEngine
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
        let received = self.received
        output.fileHandleForReading.readabilityHandler = { handle in
            let chunk = String(decoding: handle.availableData, as: UTF8.self)
            received.text.withLock { $0 += chunk }
        }
        try process.run()
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
        output.fileHandleForReading.readabilityHandler = nil
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

    @Test("an id from another run gets reset; the stream needs a read key")
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
}
