import Foundation
import SyncHealthTestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
import SyncHealthEngineTesting
#endif

/// A free TCP port on loopback (bound, read, released), below the kernel's ephemeral range (32768 and up), as
/// `LiveServer` and the test receivers take theirs: a port the kernel hands out for "any port" could be one a test
/// frees while it restarts its server, and the other process would answer in its place.
func freeLoopbackPort() -> Int {
    for _ in 0..<100 {
        let candidate = Int.random(in: 20_000..<32_000)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(candidate).bigEndian)
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 }
        }
        if bound { return candidate }
    }
    return 0
}

/// Debian's `prometheus-alertmanager` on a loopback port, with a null receiver and a 1 s `resolve_timeout`.
final class LiveAlertmanager: @unchecked Sendable {
    static let binary = "/usr/bin/prometheus-alertmanager"
    let process = Process()
    let port = freeLoopbackPort()

    init() throws {
        let directory = temporaryDirectory()
        let config = directory + "/alertmanager.yml"
        try """
        global:
          resolve_timeout: 1s
        route:
          receiver: "null"
          group_wait: 1s
        receivers:
          - name: "null"
        """.write(toFile: config, atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = [
            "--config.file=\(config)", "--web.listen-address=127.0.0.1:\(port)", "--storage.path=\(directory)/data",
            "--cluster.listen-address=",
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    deinit {
        process.terminate()
        process.waitUntilExit()
    }

    /// The alerts Alertmanager lists (active ones: a resolved alert leaves the list).
    func alerts() async throws -> [[String: Any]] {
        let url = URL(string: "http://127.0.0.1:\(port)/api/v2/alerts")!
        let (data, _) = try await URLSession.shared.data(from: url)
        return try JSONSerialization.jsonObject(with: data) as? [[String: Any]] ?? []
    }

    /// Waits until Alertmanager answers.
    func waitUntilReady() async throws {
        for _ in 0..<200 {
            if (try? await alerts()) != nil { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw LiveServer.StartFailed(description: "Alertmanager did not start")
    }
}

@Suite(
    "Alertmanager: the alertmanager format against the real thing",
    .serialized,
    .enabled(
        if: FileManager.default.isExecutableFile(atPath: LiveAlertmanager.binary)
            || ProcessInfo.processInfo.environment["SYNCHEALTH_REQUIRE_POSTGRES"] != nil
    )
)
struct AlertmanagerLiveTests {
    @Test("a firing alert shows with its labels, stays active past resolve_timeout and across a restart, and the resolve ends it")
    func fireHoldResolve() async throws {
        let alertmanager = try LiveAlertmanager()
        try await alertmanager.waitUntilReady()
        let environment = [
            "SYNCHEALTH_INGEST_KEYS": "in-0123456789abcdefghijklmnop", "SYNCHEALTH_ADMIN_KEYS": "admin-0123456789abcdefghijklmnop",
            "SYNCHEALTH_WEBHOOK_ALLOW_PRIVATE": "1",
        ]
        let server = try LiveServer(environment: environment)
        try await server.waitUntilReady()
        let subscription = Data(#"{"url": "http://127.0.0.1:\#(alertmanager.port)", "format": "alertmanager"}"#.utf8)
        #expect(try await server.request("POST", "/v1/webhooks", key: "admin-0123456789abcdefghijklmnop", body: subscription).status == 201)
        let broken = Data(
            #"{"device": {"deviceId": "am-1", "appId": "com.example.notes", "containerId": "iCloud.com.example.notes"}, "events": [{"eventId": "n", "occurredAt": "2026-11-22T10:00:00Z", "kind": "network", "available": true}, {"eventId": "f", "occurredAt": "2026-11-22T10:00:01Z", "kind": "activity", "phase": "export", "state": "failed", "error": {"domain": "CKErrorDomain", "code": 5}}]}"#
                .utf8
        )
        #expect(try await server.request("POST", "/v1/events", key: "in-0123456789abcdefghijklmnop", body: broken).status == 202)

        func ours() async throws -> [String: Any]? {
            try await alertmanager.alerts().first { ($0["labels"] as? [String: String])?["device_id"] == "am-1" }
        }
        var alert: [String: Any]?
        _ = try await eventually(tries: 100, every: .milliseconds(100)) {
            alert = try await ours()
            return alert != nil
        }
        let firing = try #require(alert)
        #expect(
            firing["labels"] as? [String: String] == [
                "alertname": "syncError", "severity": "error", "app_id": "com.example.notes",
                "container_id": "iCloud.com.example.notes", "device_id": "am-1", "error_class": "developer",
            ]
        )
        #expect(((firing["annotations"] as? [String: String])?["summary"] ?? "").isEmpty == false)
        #expect((firing["status"] as? [String: Any])?["state"] as? String == "active")

        // Past Alertmanager's resolve_timeout (1 s): still active, since every post holds it minutes ahead.
        try await Task.sleep(for: .seconds(2.5))
        #expect((try await ours()?["status"] as? [String: Any])?["state"] as? String == "active")
        let updatedBefore = try await ours()?["updatedAt"] as? String

        // A restart of SyncHealth: the refresh at start posts it again.
        #expect(server.stop() == 0)
        let again = try LiveServer(dataDirectory: server.dataDirectory, port: server.port, environment: environment)
        defer { again.stop() }
        try await again.waitUntilReady()
        let refreshed = try await eventually(tries: 100, every: .milliseconds(100)) {
            try await ours()?["updatedAt"] as? String != updatedBefore
        }
        #expect(refreshed, "posted again after the restart")
        #expect((try await ours()?["status"] as? [String: Any])?["state"] as? String == "active")

        // The device recovers: the resolve ends the alert in Alertmanager.
        let recovered = Data(
            #"{"device": {"deviceId": "am-1", "appId": "com.example.notes"}, "events": [{"eventId": "s", "occurredAt": "2026-11-22T10:00:05Z", "kind": "activity", "phase": "export", "state": "started"}]}"#
                .utf8
        )
        #expect(try await again.request("POST", "/v1/events", key: "in-0123456789abcdefghijklmnop", body: recovered).status == 202)
        let gone = try await eventually(tries: 100, every: .milliseconds(100)) { try await ours() == nil }
        #expect(gone, "resolved in Alertmanager")
    }
}
