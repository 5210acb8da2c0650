import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthStore
import SyncHealthTestSupport
import SyncHealthWebhooks
import Synchronization
import Testing

@testable import SyncHealthServer

/// Creates a subscription from a raw JSON body; returns its id.
func createWebhook(_ client: any TestClientProtocol, json body: String) async throws -> String {
    let response = try await client.execute(uri: "/v1/webhooks", method: .post, headers: headers(adminKey), body: ByteBuffer(string: body))
    #expect(response.status == .created, "\(String(buffer: response.body))")
    return try json(response)["id"] as? String ?? ""
}

extension RecordingTransport {
    /// The requests sent to URLs with `path`, with their JSON bodies.
    func requests(to path: String) -> [(request: WebhookRequest, json: Any)] {
        sent.withLock { $0 }.filter { $0.url.hasSuffix(path) }.map { ($0, (try? JSONSerialization.jsonObject(with: Data($0.body))) ?? [:]) }
    }
}

@Suite("Webhook formats and routing")
struct WebhookFormatTests {
    /// A device of `app` that breaks with a developer error (urgent: fires at once), then recovers.
    func breakAndRecover(_ client: any TestClientProtocol, device: String = "dev-1", app: String = "com.example.notes") async throws {
        try await client.post(
            batch(
                device: device,
                app: app,
                [
                    event("n", #""kind": "network", "available": true"#),
                    event("f", "2026-11-22T10:00:01Z", urgentError),
                ]
            )
        )
    }

    func recover(_ client: any TestClientProtocol, device: String = "dev-1", app: String = "com.example.notes") async throws {
        try await client.post(
            batch(device: device, app: app, [event("s", "2026-11-22T10:00:05Z", #""kind": "activity", "phase": "export", "state": "started""#)])
        )
    }

    @Test(
        "Slack: text and blocks with the kind, device, app, container, the error's class and CloudKit name, and since when; the resolve is its own message"
    )
    func slack() async throws {
        // Received over HTTP by a local receiver, through the service's own transport (libcurl).
        let receiver = TestReceiver()
        let service = TestService(transport: CurlTransport(totalTimeout: .seconds(5)), webhooks: .privateAllowed)
        try await withReceiver(receiver) { port in
            try await service.test { client in
                _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:\#(port)/hook", "format": "slack", "grouping": "device"}"#)
                try await breakAndRecover(client)
                #expect(try await eventually { receiver.count == 1 })
                let firing = receiver.all[0]
                #expect(firing.contentType == "application/json")
                #expect(firing.signature.isEmpty && firing.id.isEmpty, "only the Standard Webhooks format is signed")
                let body = firing.json
                let text = try #require(body["text"] as? String)
                #expect(text.contains("syncError firing"))
                let blocks = try #require(body["blocks"] as? [[String: Any]])
                #expect(blocks.allSatisfy { ["section", "context"].contains($0["type"] as? String ?? "") })
                let fields = (blocks.compactMap { $0["fields"] as? [[String: Any]] }.first ?? []).compactMap { $0["text"] as? String }
                #expect(fields.contains("*Device*\ndev-1"))
                #expect(fields.contains("*App*\ncom.example.notes"))
                #expect(fields.contains("*Container*\niCloud.com.example.notes"))
                #expect(fields.contains("*Error*\ndeveloper: CKErrorDomain 5 (badContainer)"))
                #expect(fields.contains { $0.hasPrefix("*Since*\n") })
                let texts = blocks.compactMap { ($0["text"] as? [String: Any])?["text"] as? String }
                #expect(texts.contains { $0.hasPrefix("*What to do* (developer): ") && $0.contains("entitlement") }, "the error's advice")

                try await recover(client)
                #expect(try await eventually { receiver.count == 2 })
                #expect((receiver.all[1].json["text"] as? String)?.contains("syncError resolved") == true)
            }
        }
    }

    @Test("Slack: with a public URL, the message links to the device's page on the dashboard, in a block and in text")
    func slackLinksToDashboard() async throws {
        let transport = RecordingTransport()
        var configuration = EngineConfiguration()
        configuration.publicURL = "https://synchealth.example.com/"
        let service = TestService(configuration: configuration, transport: transport, webhooks: .privateAllowed)
        try await service.test { client in
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/slack", "format": "slack", "grouping": "device"}"#)
            try await breakAndRecover(client)
            #expect(try await eventually { transport.requests(to: "/slack").count == 1 })
            let body = try #require(transport.requests(to: "/slack").first?.json as? [String: Any])
            let link = "https://synchealth.example.com/#/device/com.example.notes/dev-1"
            #expect((body["text"] as? String)?.hasSuffix("\n" + link) == true)
            let texts = (body["blocks"] as? [[String: Any]] ?? []).compactMap { ($0["text"] as? [String: Any])?["text"] as? String }
            #expect(texts.contains("<\(link)|Open the device on the dashboard>"))
        }
    }

    @Test("PagerDuty: Events API v2 trigger and resolve share the alert id as dedup_key; severity from the error class")
    func pagerDuty() async throws {
        let receiver = TestReceiver()
        let service = TestService(transport: CurlTransport(totalTimeout: .seconds(5)), webhooks: .privateAllowed)
        try await withReceiver(receiver) { port in
            try await service.test { client in
                _ = try await createWebhook(
                    client,
                    json: #"{"url": "http://127.0.0.1:\#(port)/hook", "format": "pagerduty", "routingKey": "R0UTING", "grouping": "device"}"#
                )
                try await breakAndRecover(client)
                #expect(try await eventually { receiver.count == 1 })
                #expect(receiver.all[0].contentType == "application/json")
                let trigger = receiver.all[0].json
                #expect(trigger["routing_key"] as? String == "R0UTING")
                #expect(trigger["event_action"] as? String == "trigger")
                let dedup = try #require(trigger["dedup_key"] as? String)
                #expect(dedup.hasPrefix("al_"))
                let payload = try #require(trigger["payload"] as? [String: Any])
                #expect((payload["summary"] as? String)?.isEmpty == false)
                #expect(payload["source"] as? String == "dev-1")
                #expect(payload["severity"] as? String == "error", "developer errors page as error; dataLoss as critical")
                #expect(payload["component"] as? String == "com.example.notes")
                #expect(payload["group"] as? String == "iCloud.com.example.notes")
                #expect(payload["class"] as? String == "developer")
                #expect(Timestamp(rfc3339: payload["timestamp"] as? String ?? "") != nil)
                let details = try #require(payload["custom_details"] as? [String: Any])
                #expect(details["error"] as? String == "CKErrorDomain 5 (badContainer)")
                #expect(details["syncStateSummary"] as? String == "error")
                #expect(details["adviceWho"] as? String == "developer")
                #expect((details["advice"] as? String)?.contains("container identifier") == true)

                try await recover(client)
                #expect(try await eventually { receiver.count == 2 })
                let resolve = receiver.all[1].json
                #expect(resolve["event_action"] as? String == "resolve")
                #expect(resolve["dedup_key"] as? String == dedup)
                #expect(resolve["routing_key"] as? String == "R0UTING")
            }
        }
    }

    @Test("Alertmanager: POST /api/v2/alerts with the labels and annotations; firing holds a few minutes ahead, the resolve ends at the resolve")
    func alertmanager() async throws {
        let transport = RecordingTransport()
        let service = TestService(transport: transport, webhooks: .privateAllowed)
        try await service.test { client in
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/am/", "format": "alertmanager"}"#)
            try await breakAndRecover(client)
            #expect(try await eventually { transport.requests(to: "/am/api/v2/alerts").count >= 1 })
            let firing = try #require((transport.requests(to: "/am/api/v2/alerts").first?.json as? [[String: Any]])?.first)
            let labels = try #require(firing["labels"] as? [String: String])
            #expect(
                labels == [
                    "alertname": "syncError", "severity": "error", "app_id": "com.example.notes", "container_id": "iCloud.com.example.notes",
                    "device_id": "dev-1", "error_class": "developer",
                ]
            )
            let annotations = try #require(firing["annotations"] as? [String: String])
            #expect(annotations["summary"]?.isEmpty == false && annotations["description"]?.isEmpty == false)
            let startsAt = try #require(Timestamp(rfc3339: firing["startsAt"] as? String ?? ""))
            let endsAt = try #require(Timestamp(rfc3339: firing["endsAt"] as? String ?? ""))
            #expect(endsAt - testStart == .seconds(300), "held five minutes past the post; the refresh posts again each minute")
            #expect(startsAt <= testStart)

            try await recover(client)
            #expect(
                try await eventually {
                    (transport.requests(to: "/am/api/v2/alerts").last?.json as? [[String: Any]])?.first?["endsAt"] as? String == testStart.rfc3339
                }
            )
            let resolved = try #require((transport.requests(to: "/am/api/v2/alerts").last?.json as? [[String: Any]])?.first)
            #expect(resolved["labels"] as? [String: String] == labels, "the same label set, so Alertmanager resolves the same alert")
        }
    }

    @Test("routing: an alert reaches only the subscriptions whose apps, containers, kinds and error classes name it")
    func routing() async throws {
        let transport = RecordingTransport()
        let service = TestService(transport: transport, webhooks: .privateAllowed)
        try await service.test { client in
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/all"}"#)
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/notes", "appIds": ["com.example.notes"]}"#)
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/bank", "appIds": ["com.example.bank"]}"#)
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/container", "containerIds": ["iCloud.com.example.notes"]}"#)
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/dataloss", "errorClasses": ["dataLoss"]}"#)
            _ = try await createWebhook(
                client,
                json: #"{"url": "http://127.0.0.1:9/developer", "errorClasses": ["developer"], "kinds": ["syncError"]}"#
            )
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/stalled", "kinds": ["syncStalled"]}"#)
            try await breakAndRecover(client)
            try await service.drained()
            let reached = Set(transport.sent.withLock { $0 }.compactMap { $0.url.split(separator: "/").last.map(String.init) })
            #expect(reached == ["all", "notes", "container", "developer"])
        }
    }

    @Test("bad format fields are 400: an unknown format or error class, pagerduty without a routingKey; the fields read back")
    func validation() async throws {
        let service = TestService(webhooks: .privateAllowed)
        try await service.test { client in
            for body in [
                #"{"url": "http://127.0.0.1:9/x", "format": "teams"}"#, #"{"url": "http://127.0.0.1:9/x", "format": "pagerduty"}"#,
                #"{"url": "http://127.0.0.1:9/x", "errorClasses": ["fatal"]}"#, #"{"url": "http://127.0.0.1:9/x", "appIds": [""]}"#,
            ] {
                let response = try await client.execute(
                    uri: "/v1/webhooks",
                    method: .post,
                    headers: headers(adminKey),
                    body: ByteBuffer(string: body)
                )
                #expect(response.status == .badRequest, "\(body)")
                #expect(response.headers[.contentType] == "application/problem+json")
            }
            let id = try await createWebhook(
                client,
                json:
                    #"{"url": "http://127.0.0.1:9/x", "format": "pagerduty", "routingKey": "k", "appIds": ["b", "a", "a"], "containerIds": ["c"], "errorClasses": ["dataLoss", "developer"]}"#
            )
            let read = try json(try await client.get("/v1/webhooks/\(id)", key: adminKey))
            #expect(read["format"] as? String == "pagerduty")
            #expect(read["routingKey"] as? String == "k")
            #expect(read["appIds"] as? [String] == ["a", "b"])
            #expect(read["containerIds"] as? [String] == ["c"])
            #expect(read["errorClasses"] as? [String] == ["dataLoss", "developer"])
            #expect(read["grouping"] as? String == "incident", "PagerDuty hears of incidents unless told otherwise")
            let plain = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/y"}"#)
            let plainRead = try json(try await client.get("/v1/webhooks/\(plain)", key: adminKey))
            #expect(plainRead["format"] as? String == "standardWebhooks" && plainRead["grouping"] as? String == "device")
            for bad in [
                #"{"url": "http://127.0.0.1:9/z", "grouping": "container"}"#,
                #"{"url": "http://127.0.0.1:9/z", "format": "alertmanager", "grouping": "incident"}"#,
            ] {
                let response = try await client.execute(uri: "/v1/webhooks", method: .post, headers: headers(adminKey), body: ByteBuffer(string: bad))
                #expect(response.status == .badRequest, "\(bad)")
            }
        }
    }

    @Test("a PagerDuty 429 is retried after its Retry-After")
    func pagerDutyRetryAfter() async throws {
        let transport = ScriptedTransport(answers: [.status(429, retryAfter: "40")])
        var webhooks = DeliveryConfiguration.privateAllowed
        webhooks.jitter = 0
        let clock = ManualClock(testStart)
        let service = TestService(clock: clock, transport: transport, webhooks: webhooks)
        try await service.test { client in
            let id = try await createWebhook(
                client,
                json: #"{"url": "http://127.0.0.1:9/pd", "format": "pagerduty", "routingKey": "k", "grouping": "device"}"#
            )
            try await breakAndRecover(client)
            #expect(try await eventually { try await deliveryLog(client, id).first?["statusCode"] as? Int == 429 })
            #expect(try await deliveryLog(client, id).first?["nextRetryAt"] as? String == (testStart + .seconds(40)).rfc3339)
            clock.advance(by: .seconds(40))
            #expect(try await eventually { try await deliveryLog(client, id).first?["outcome"] as? String == "delivered" })
            #expect(transport.count == 2)
        }
    }
}

/// Answers from a script, then 200.
final class ScriptedTransport: WebhookTransport {
    let answers: Mutex<[WebhookResponse]>
    let sentCount = Mutex(0)
    var count: Int { sentCount.withLock { $0 } }

    init(answers: [WebhookResponse]) { self.answers = Mutex(answers) }

    func send(_ request: WebhookRequest) async -> WebhookResponse {
        sentCount.withLock { $0 += 1 }
        return answers.withLock { $0.isEmpty ? .status(200, retryAfter: nil) : $0.removeFirst() }
    }
}
