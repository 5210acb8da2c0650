import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthSQLite
import SyncHealthTestSupport
import Testing

@testable import SyncHealthServer

/// A silence that held an incident's first message: when it ends, what still holds is told, once.
@Suite("Silences and incidents")
struct SilenceIncidentTests {
    static func breakDevice(_ client: any TestClientProtocol, _ device: String) async throws {
        let body =
            #"{"device": {"deviceId": "\#(device)", "appId": "com.example.notes", "containerId": "iCloud.com.example.notes", "appVersion": "3.4"}, "events": [\#(event("n", #""kind": "network", "available": true"#)), \#(event("f", "2026-11-22T10:00:01Z", urgentError))]}"#
        #expect(try await client.post(ByteBuffer(string: body)).status == .accepted)
    }

    static func recover(_ client: any TestClientProtocol, _ device: String) async throws {
        try await client.post(
            batch(device: device, [event("s", "2026-11-22T10:00:05Z", #""kind": "activity", "phase": "export", "state": "succeeded""#)])
        )
    }

    /// A service with Slack, PagerDuty, Alertmanager and Standard Webhooks subscriptions, a 2 s group wait.
    static func service(_ transport: RecordingTransport, clock: ManualClock) -> TestService {
        var configuration = EngineConfiguration()
        configuration.incidents.groupWait = .seconds(2)
        return TestService(clock: clock, configuration: configuration, transport: transport, webhooks: .privateAllowed)
    }

    static func subscribe(_ client: any TestClientProtocol) async throws {
        _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/slack", "format": "slack"}"#)
        _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/pd", "format": "pagerduty", "routingKey": "R"}"#)
        _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/am/", "format": "alertmanager"}"#)
        _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/std"}"#)
    }

    @Test(
        "an incident a silence held is told as opened at the first grouping after the silence is deleted or expires, in every format; its resolve follows",
        arguments: ["delete", "expire"]
    )
    func releasedWhenTheSilenceEnds(end: String) async throws {
        let transport = RecordingTransport()
        let clock = ManualClock(testStart)
        try await Self.service(transport, clock: clock).test { client in
            try await Self.subscribe(client)
            let endsAt = end == "expire" ? (testStart + .seconds(20)).rfc3339 : "2026-11-30T00:00:00Z"
            let silence = try await createSilence(
                client,
                #"{"matchers": {"appId": "com.example.notes"}, "endsAt": "\#(endsAt)", "comment": "known"}"#
            )
            try await Self.breakDevice(client, "dev-1")
            for _ in 0..<3 { try await clock.advanceAndSettle(by: .seconds(1)) }
            let incidents = try json(try await client.get("/v1/incidents?state=open"))["data"] as? [[String: Any]] ?? []
            #expect(incidents.count == 1 && !(incidents.first?["notifiedAt"] is String), "not told while silenced: \(incidents)")
            #expect(transport.requests(to: "/slack").isEmpty && transport.requests(to: "/pd").isEmpty && transport.requests(to: "/std").isEmpty)

            if end == "delete" {
                let id = silence["id"] as? String ?? ""
                #expect(try await client.execute(uri: "/v1/silences/\(id)", method: .delete, headers: headers(adminKey)).status == .ok)
            } else {
                for _ in 0..<17 { try await clock.advanceAndSettle(by: .seconds(1)) }
            }
            // The next grouping (every second with this group wait) tells it.
            for _ in 0..<3 { try await clock.advanceAndSettle(by: .seconds(1)) }
            #expect(try await eventually { transport.requests(to: "/slack").count == 1 && transport.requests(to: "/pd").count == 1 })
            #expect(try await eventually { transport.requests(to: "/std").count == 1 && transport.requests(to: "/am/api/v2/alerts").count >= 1 })
            let slack = transport.requests(to: "/slack")[0].json as? [String: Any] ?? [:]
            #expect((slack["text"] as? String)?.contains("opened") == true || (slack["text"] as? String)?.contains("🔴") == true, "\(slack)")
            let trigger = transport.requests(to: "/pd")[0].json as? [String: Any] ?? [:]
            #expect(trigger["event_action"] as? String == "trigger")
            #expect((transport.requests(to: "/std")[0].json as? [String: Any])?["type"] as? String == "alert.firing")

            // Told once: nothing more while it holds.
            for _ in 0..<3 { try await clock.advanceAndSettle(by: .seconds(1)) }
            #expect(transport.requests(to: "/slack").count == 1 && transport.requests(to: "/pd").count == 1)

            try await Self.recover(client, "dev-1")
            for _ in 0..<3 { try await clock.advanceAndSettle(by: .seconds(1)) }
            #expect(try await eventually { transport.requests(to: "/pd").count == 2 })
            let resolve = transport.requests(to: "/pd")[1].json as? [String: Any] ?? [:]
            #expect(resolve["event_action"] as? String == "resolve")
            #expect(resolve["dedup_key"] as? String == trigger["dedup_key"] as? String, "the resolve has its trigger")
        }
    }

    @Test("an incident that resolved while the silence held it is not told when the silence ends")
    func resolvedMeanwhile() async throws {
        let transport = RecordingTransport()
        let clock = ManualClock(testStart)
        try await Self.service(transport, clock: clock).test { client in
            try await Self.subscribe(client)
            let silence = try await createSilence(
                client,
                #"{"matchers": {"appId": "com.example.notes"}, "endsAt": "2026-11-30T00:00:00Z", "comment": "known"}"#
            )
            try await Self.breakDevice(client, "dev-1")
            for _ in 0..<3 { try await clock.advanceAndSettle(by: .seconds(1)) }
            try await Self.recover(client, "dev-1")
            for _ in 0..<3 { try await clock.advanceAndSettle(by: .seconds(1)) }
            let id = silence["id"] as? String ?? ""
            #expect(try await client.execute(uri: "/v1/silences/\(id)", method: .delete, headers: headers(adminKey)).status == .ok)
            for _ in 0..<3 { try await clock.advanceAndSettle(by: .seconds(1)) }
            try await Task.sleep(for: .milliseconds(200))
            #expect(transport.requests(to: "/slack").isEmpty && transport.requests(to: "/pd").isEmpty)
        }
    }

    @Test("an incident told before a silence began is not told again when the silence ends")
    func toldBeforeTheSilence() async throws {
        let transport = RecordingTransport()
        let clock = ManualClock(testStart)
        try await Self.service(transport, clock: clock).test { client in
            try await Self.subscribe(client)
            try await Self.breakDevice(client, "dev-1")
            for _ in 0..<3 { try await clock.advanceAndSettle(by: .seconds(1)) }
            #expect(try await eventually { transport.requests(to: "/slack").count == 1 })
            let silence = try await createSilence(
                client,
                #"{"matchers": {"appId": "com.example.notes"}, "endsAt": "2026-11-30T00:00:00Z", "comment": "later"}"#
            )
            let id = silence["id"] as? String ?? ""
            #expect(try await client.execute(uri: "/v1/silences/\(id)", method: .delete, headers: headers(adminKey)).status == .ok)
            for _ in 0..<3 { try await clock.advanceAndSettle(by: .seconds(1)) }
            try await Task.sleep(for: .milliseconds(200))
            #expect(transport.requests(to: "/slack").count == 1, "told once")
        }
    }

    @Test("an incident told before a silence has its resolve told during it: PagerDuty's trigger is closed")
    func resolveToldUnderTheSilence() async throws {
        let transport = RecordingTransport()
        let clock = ManualClock(testStart)
        try await Self.service(transport, clock: clock).test { client in
            try await Self.subscribe(client)
            try await Self.breakDevice(client, "dev-1")
            for _ in 0..<3 { try await clock.advanceAndSettle(by: .seconds(1)) }
            #expect(try await eventually { transport.requests(to: "/pd").count == 1 && transport.requests(to: "/std").count == 1 })
            _ = try await createSilence(
                client,
                #"{"matchers": {"appId": "com.example.notes"}, "endsAt": "2026-11-30T00:00:00Z", "comment": "later"}"#
            )
            try await Self.recover(client, "dev-1")
            for _ in 0..<3 { try await clock.advanceAndSettle(by: .seconds(1)) }
            #expect(try await eventually { transport.requests(to: "/pd").count == 2 && transport.requests(to: "/slack").count == 2 })
            let trigger = transport.requests(to: "/pd")[0].json as? [String: Any] ?? [:]
            let resolve = transport.requests(to: "/pd")[1].json as? [String: Any] ?? [:]
            #expect(resolve["event_action"] as? String == "resolve" && resolve["dedup_key"] as? String == trigger["dedup_key"] as? String)
            #expect(try await eventually { transport.requests(to: "/std").count == 2 }, "the device alert's resolve too")
        }
    }

    @Test("a restart inside the group wait: the incident is told once, after the wait, with its resolve; every format hears once")
    func restartInsideTheGroupWait() async throws {
        let transport = RecordingTransport()
        let clock = ManualClock(testStart)
        let directory = temporaryDirectory()
        var configuration = EngineConfiguration()
        configuration.incidents.groupWait = .seconds(30)
        func service() throws -> TestService {
            TestService(
                store: .local(try SQLiteStore(directory: directory, synchronous: .normal)),
                clock: clock,
                configuration: configuration,
                transport: transport,
                webhooks: .privateAllowed
            )
        }
        try await service().test { client in
            try await Self.subscribe(client)
            try await Self.breakDevice(client, "dev-1")
            for _ in 0..<2 { try await clock.advanceAndSettle(by: .seconds(5)) }
            #expect(try await eventually { transport.requests(to: "/std").count == 1 }, "the device alert goes at once")
            #expect(transport.requests(to: "/slack").isEmpty && transport.requests(to: "/pd").isEmpty, "10 s into a 30 s wait")
        }
        // Restarted 10 s into the wait: the incident is stored, its wait runs on, and nothing is told twice.
        try await service().test { client in
            for _ in 0..<5 { try await clock.advanceAndSettle(by: .seconds(5)) }
            #expect(try await eventually { transport.requests(to: "/slack").count == 1 && transport.requests(to: "/pd").count == 1 })
            let incidents = try json(try await client.get("/v1/incidents"))["data"] as? [[String: Any]] ?? []
            #expect(incidents.count == 1, "one incident across the restart: \(incidents)")
            try await Self.recover(client, "dev-1")
            for _ in 0..<3 { try await clock.advanceAndSettle(by: .seconds(5)) }
            #expect(try await eventually { transport.requests(to: "/pd").count == 2 && transport.requests(to: "/slack").count == 2 })
            #expect(try await eventually { transport.requests(to: "/std").count == 2 })
            let pd = transport.requests(to: "/pd").map { $0.json as? [String: Any] ?? [:] }
            #expect(pd.map { $0["event_action"] as? String } == ["trigger", "resolve"])
            #expect(pd[0]["dedup_key"] as? String == pd[1]["dedup_key"] as? String)
            let std = transport.requests(to: "/std").map { ($0.json as? [String: Any])?["type"] as? String }
            #expect(std == ["alert.firing", "alert.resolved"], "each once, across the restart")
        }
    }
}
