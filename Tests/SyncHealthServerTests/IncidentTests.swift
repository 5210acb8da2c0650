import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthPostgres
import SyncHealthStore
import SyncHealthTestSupport
import SyncHealthWebhooks
import Testing

@testable import SyncHealthServer

@Suite("Incidents: one message per incident, not per device", .serialized)
struct IncidentTests {
    static func breakDevice(_ client: any TestClientProtocol, _ device: String, version: String = "2.0") async throws {
        let body =
            #"{"device": {"deviceId": "\#(device)", "appId": "com.example.notes", "containerId": "iCloud.com.example.notes", "appVersion": "\#(version)"}, "events": [\#(event("n", #""kind": "network", "available": true"#)), \#(event("f", "2026-11-22T10:00:01Z", urgentError))]}"#
        #expect(try await client.post(ByteBuffer(string: body)).status == .accepted)
    }

    static func recover(_ client: any TestClientProtocol, _ device: String) async throws {
        let events = [event("s", "2026-11-22T10:00:05Z", #""kind": "activity", "phase": "export", "state": "started""#)]
        #expect(try await client.post(batch(device: device, events)).status == .accepted)
    }

    /// Runs `body` with three receivers on loopback: Slack's, PagerDuty's and a Standard Webhooks one.
    static func withReceivers(
        _ body: @escaping @Sendable (_ slack: TestReceiver, _ pd: TestReceiver, _ standard: TestReceiver, _ ports: [Int]) async throws -> Void
    )
        async throws
    {
        let (slack, pd, standard) = (TestReceiver(), TestReceiver(), TestReceiver())
        try await withReceiver(slack) { a in
            try await withReceiver(pd) { b in
                try await withReceiver(standard) { c in try await body(slack, pd, standard, [a, b, c]) }
            }
        }
    }

    @Test(
        "100 devices break with one error: Slack and PagerDuty get one trigger naming 100 devices and one resolve; Standard Webhooks gets 100, and fleetDegraded"
    )
    func grouping() async throws {
        var configuration = EngineConfiguration()
        configuration.incidents.groupWait = .seconds(2)
        let clock = ManualClock(testStart)
        let service = TestService(
            clock: clock,
            configuration: configuration,
            transport: CurlTransport(totalTimeout: .seconds(5)),
            webhooks: .privateAllowed
        )
        try await Self.withReceivers { slack, pd, standard, ports in
            try await service.test { client in
                _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:\#(ports[0])/hook", "format": "slack"}"#)
                _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:\#(ports[1])/hook", "format": "pagerduty", "routingKey": "R"}"#)
                _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:\#(ports[2])/hook"}"#)
                func standardTold(_ kind: String) -> Int { standard.all.count { ($0.json["data"] as? [String: Any])?["kind"] as? String == kind } }
                for i in 0..<100 { try await Self.breakDevice(client, "dev-\(i)", version: i < 60 ? "2.0" : "1.9") }
                #expect(
                    try await eventually { standardTold("syncError") == 100 && standardTold("fleetDegraded") == 1 },
                    "Standard Webhooks groups by device by default: every device, and the fleet alert beside them"
                )
                try await clock.advanceAndSettle(by: .seconds(1))
                #expect(slack.count == 0 && pd.count == 0, "nothing before the group wait")
                try await clock.advanceAndSettle(by: .seconds(1))
                try await clock.advanceAndSettle(by: .seconds(1))
                let told = try await eventually { slack.count == 1 && pd.count == 1 }
                let listing = String(buffer: try await client.get("/v1/incidents").body)
                #expect(told, "\(slack.count) \(pd.count) \(standard.count) \(listing)")
                guard slack.count == 1, pd.count == 1 else { return }
                let text = slack.all[0].json["text"] as? String ?? ""
                #expect(text.contains("on 100 devices") && text.contains("badContainer"), "\(text)")
                let trigger = pd.all[0].json
                #expect(trigger["event_action"] as? String == "trigger")
                let details = (trigger["payload"] as? [String: Any])?["custom_details"] as? [String: String] ?? [:]
                #expect(details["devices"] == "100" && details["appVersions"] == "2.0: 60, 1.9: 40" && details["adviceWho"] == "developer")
                let incidentId = try #require(trigger["dedup_key"] as? String)

                let listed = try json(try await client.get("/v1/incidents?state=open"))
                let incidents = try #require(listed["data"] as? [[String: Any]])
                #expect(incidents.count == 1 && incidents[0]["id"] as? String == incidentId && incidents[0]["devices"] as? Int == 100)
                #expect((incidents[0]["history"] as? [[String: Any]])?.last?["devices"] as? Int == 100, "its count over time ends at 100")
                #expect((incidents[0]["error"] as? [String: Any])?["name"] as? String == "badContainer")
                let detail = try json(try await client.get("/v1/incidents/\(incidentId)?limit=30"))
                #expect((detail["firingDevices"] as? [[String: Any]])?.count == 30 && detail["nextCursor"] as? String == "30")
                #expect(detail["devices"] as? Int == 100, "the incident's count, beside the page")
                #expect(try await client.get("/v1/incidents/in_nope").status == .notFound)

                for i in 0..<100 { try await Self.recover(client, "dev-\(i)") }
                #expect(try await eventually { standardTold("syncError") == 200 && standardTold("fleetDegraded") == 2 })
                try await clock.advanceAndSettle(by: .seconds(1))
                #expect(try await eventually { slack.count == 2 && pd.count == 2 })
                #expect((slack.all[1].json["text"] as? String)?.hasPrefix("✅ Resolved") == true)
                #expect(pd.all[1].json["event_action"] as? String == "resolve" && pd.all[1].json["dedup_key"] as? String == incidentId)
                let resolved = try json(try await client.get("/v1/incidents?state=resolved"))
                #expect((resolved["data"] as? [[String: Any]])?.first?["peakDevices"] as? Int == 100)
                try await clock.advanceAndSettle(by: .seconds(10))
                #expect(slack.count == 2 && pd.count == 2, "each told once")
            }
        }
    }
}

extension IncidentTests {
    @Test("a subscription that groups by incident hears of fleetDegraded only when it names that kind")
    func fleetAlertForIncidentSubscribers() async throws {
        let transport = RecordingTransport()
        var configuration = EngineConfiguration()
        configuration.incidents.groupWait = .seconds(2)
        let clock = ManualClock(testStart)
        let service = TestService(clock: clock, configuration: configuration, transport: transport, webhooks: .privateAllowed)
        try await service.test { client in
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/plain", "format": "slack"}"#)
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/fleet", "format": "slack", "kinds": ["fleetDegraded"]}"#)
            for i in 0..<30 { try await Self.breakDevice(client, "dev-\(i)") }
            #expect(try await eventually { transport.requests(to: "/fleet").count == 1 }, "it named fleetDegraded")
            for _ in 0..<3 { try await clock.advanceAndSettle(by: .seconds(1)) }
            #expect(try await eventually { transport.requests(to: "/plain").count == 1 })
            let text = (transport.requests(to: "/plain").first?.json as? [String: Any])?["text"] as? String ?? ""
            #expect(text.contains("on 30 devices"), "the one message is the incident: \(text)")
            #expect(transport.requests(to: "/fleet").count == 1, "no incident for a subscription that names only fleetDegraded")
        }
    }
}

extension IncidentTests {
    @Test(
        "a key that opens a fourth time within the flap window is told once as flapping, held open, and resolved once quiet",
        arguments: EngineStore.withShared
    )
    func flappingIncident(store: EngineStore) async throws {
        let transport = RecordingTransport()
        var configuration = EngineConfiguration()
        configuration.incidents.groupWait = .seconds(2)
        configuration.notifications.flapWindow = .seconds(60)
        let clock = ManualClock(testStart)
        let service = TestService(
            store: try await store.make(),
            clock: clock,
            configuration: configuration,
            transport: transport,
            webhooks: .privateAllowed
        )
        try await service.test { client in
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/slack", "format": "slack"}"#)
            // Only this error's incident: recovered devices may stall later, which is another incident.
            func told() -> [String] {
                transport.requests(to: "/slack").compactMap { ($0.json as? [String: Any])?["text"] as? String }.filter { $0.contains("badContainer") }
            }
            for cycle in 0..<4 {
                try await Self.breakDevice(client, "dev-\(cycle)")
                for _ in 0..<3 { try await clock.advanceAndSettle(by: .seconds(1)) }
                #expect(try await eventually { told().count == 2 * cycle + 1 }, "cycle \(cycle) opened: \(told())")
                try await Self.recover(client, "dev-\(cycle)")
                try await clock.advanceAndSettle(by: .seconds(1))
                guard cycle < 3 else { break }
                #expect(try await eventually { told().count == 2 * cycle + 2 }, "cycle \(cycle) resolved: \(told())")
            }
            #expect(told().last?.contains("flapping") == true, "the fourth open says it is flapping: \(told())")
            func open() async throws -> [[String: Any]] {
                try json(try await client.get("/v1/incidents?state=open"))["data"] as? [[String: Any]] ?? []
            }
            #expect(try await eventually { try await open().first?["quietSince"] is String }, "held open while its devices are quiet")
            let held = try #require(try await open().first?["id"] as? String)

            try await Self.breakDevice(client, "dev-4")
            for _ in 0..<3 { try await clock.advanceAndSettle(by: .seconds(1)) }
            #expect(try await eventually { try await open().first?["devices"] as? Int == 1 })
            #expect(try await open().map { $0["id"] as? String } == [held], "breaking again joins the held incident")
            try await Self.recover(client, "dev-4")
            try await clock.advanceAndSettle(by: .seconds(1))
            #expect(try await eventually { try await open().first?["quietSince"] is String })
            try await clock.advanceAndSettle(by: .seconds(59))
            #expect(try await open().count == 1, "quiet for less than the window")
            try await clock.advanceAndSettle(by: .seconds(1))
            #expect(try await eventually { told().count == 8 }, "\(told())")
            // Messages of one incident key are delivered in order, so nothing was told between the flapping open and this.
            #expect(told().last?.hasPrefix("✅ Resolved") == true && told().count == 8)
            #expect(try await open().isEmpty)
        }
    }
}

@Suite("Incidents on two PostgreSQL replicas", .serialized, .enabled(if: PostgresTesting.baseURL != nil))
struct SharedIncidentTests {
    @Test("two replicas grouping the same storm write one incident and deliver its messages once")
    func onceAcrossReplicas() async throws {
        let url = try await PostgresTesting.freshDatabase()
        var configuration = EngineConfiguration()
        configuration.incidents.groupWait = .seconds(2)
        configuration.alerts.fleetMinimumActive = 1_000
        let clock = ManualClock(testStart)
        func replica() throws -> TestService {
            TestService(
                store: .shared(try PostgresStore(url: url, logger: testLogger())),
                clock: clock,
                configuration: configuration,
                transport: CurlTransport(totalTimeout: .seconds(5)),
                webhooks: .privateAllowed
            )
        }
        let (a, b) = (try replica(), try replica())
        let slack = TestReceiver()
        try await withReceiver(slack) { port in
            try await a.test { clientA in
                try await b.test { clientB in
                    _ = try await createWebhook(clientA, json: #"{"url": "http://127.0.0.1:\#(port)/hook", "format": "slack"}"#)
                    for i in 0..<40 { try await IncidentTests.breakDevice(i % 2 == 0 ? clientA : clientB, "dev-\(i)") }
                    for _ in 0..<4 { try await clock.advanceAndSettle(by: .seconds(1)) }
                    #expect(try await eventually { slack.count == 1 })
                    #expect((slack.all.first?.json["text"] as? String)?.contains("on 40 devices") == true)
                    let open = try json(try await clientB.get("/v1/incidents?state=open"))
                    #expect((open["data"] as? [Any])?.count == 1, "one incident, whichever replica wrote it")
                    for i in 0..<40 { try await IncidentTests.recover(i % 2 == 0 ? clientB : clientA, "dev-\(i)") }
                    for _ in 0..<4 { try await clock.advanceAndSettle(by: .seconds(1)) }
                    #expect(try await eventually { slack.count == 2 })
                    try await clock.advanceAndSettle(by: .seconds(5))
                    #expect(slack.count == 2, "each message once")
                }
            }
        }
    }
}

extension IncidentTests {
    @Test("a silence on an app version holds an incident whose devices all run it, and not one that spans versions", arguments: [false, true])
    func silenceOnVersion(spansVersions: Bool) async throws {
        let transport = RecordingTransport()
        var configuration = EngineConfiguration()
        configuration.incidents.groupWait = .seconds(2)
        configuration.alerts.fleetMinimumActive = 1_000
        let clock = ManualClock(testStart)
        let service = TestService(clock: clock, configuration: configuration, transport: transport, webhooks: .privateAllowed)
        try await service.test { client in
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/slack", "format": "slack"}"#)
            _ = try await createSilence(client, #"{"matchers": {"appVersion": "2.0"}, "endsAt": "2030-01-01T00:00:00Z", "comment": "known"}"#)
            for i in 0..<10 { try await Self.breakDevice(client, "dev-\(i)", version: spansVersions && i < 3 ? "2.1" : "2.0") }
            for _ in 0..<4 { try await clock.advanceAndSettle(by: .seconds(1)) }
            // Its first notice is decided, and its messages written with it, in one transaction; one a silence holds
            // is not told (nor marked told) until the silence ends.
            #expect(
                try await eventually {
                    let open = try json(try await client.get("/v1/incidents?state=open"))["data"] as? [[String: Any]]
                    return open?.count == 1 && (open?.first?["notifiedAt"] is String) == spansVersions
                }
            )
            if spansVersions {
                #expect(try await eventually { transport.requests(to: "/slack").count == 1 }, "3 of its devices run 2.1")
            } else {
                let queued = try await service.store.dueMessages(now: testStart + .seconds(3_600), limit: 10)
                #expect(queued.isEmpty && transport.requests(to: "/slack").isEmpty, "every device runs 2.0: held")
            }
        }
    }
}

@Suite("An incident's devices as the contract has them")
struct IncidentDeviceEncodingTests {
    @Test("a device that named no app version is written with appVersion null, not without the key")
    func nullVersion() throws {
        let data = try JSONResponse.encoder.encode(IncidentDeviceDTO(deviceId: "d", appVersion: nil, since: "2026-11-22T10:00:00Z"))
        #expect(String(decoding: data, as: UTF8.self) == #"{"appVersion":null,"deviceId":"d","since":"2026-11-22T10:00:00Z"}"#)
    }
}
