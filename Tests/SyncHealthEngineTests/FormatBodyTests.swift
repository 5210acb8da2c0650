import Foundation
import SyncHealthCore
import SyncHealthStore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthEngine

/// Each destination's bodies as values, without HTTP: what a fire, a resolve and an incident become, field by field.
/// `WebhookFormatTests` (server) sends the same bodies to real receivers.
@Suite("The formats' bodies, as values")
struct FormatBodyTests {
    static let now = t0 + .seconds(60)

    static var context: AlertContext {
        var context = AlertContext()
        context.error = SyncErrorReport(domain: "CKErrorDomain", code: 25)
        context.summary = .error
        context.pendingChanges = 3
        context.info = DeviceInfo(containerId: "iCloud.x", platform: "iOS", osVersion: "18.1", appVersion: "2.0")
        return context
    }

    static var pagerDuty: WebhookSubscription {
        var hook = subscription()
        hook.format = .pagerduty
        hook.routingKey = "R0UT1NG"
        return hook
    }

    static var incident: IncidentRecord {
        let key = IncidentKey(
            appId: "com.example",
            containerId: "iCloud.x",
            kind: .syncError,
            signature: ErrorSignature(domain: "CKErrorDomain", code: 25)
        )
        return IncidentRecord(
            id: IncidentRecord.id(key: key, openedAt: t0),
            key: key,
            openedAt: t0,
            devices: 12,
            peakDevices: 12,
            byVersion: ["2.0": 12],
            samples: ["d1", "d2"]
        )
    }

    static func body(
        _ format: any AlertFormat.Type,
        _ alert: AlertRecord,
        _ change: AlertTransition.Change,
        hook: WebhookSubscription = subscription()
    )
        throws -> [String: Any]
    {
        let body = format.alertBody(alert, change: change, context: context, subscription: hook, now: now, publicURL: nil)
        let text = try #require(body)
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    @Test("Standard Webhooks: the API's alert and incident in an envelope typed by what happened")
    func standardWebhooks() throws {
        let fired = try Self.body(StandardWebhooksFormat.self, alert("al_1", .syncError, .firing), .fire)
        #expect(fired["type"] as? String == "alert.firing")
        #expect(fired["timestamp"] as? String == Self.now.rfc3339)
        let data = try #require(fired["data"] as? [String: Any])
        #expect(data["id"] as? String == "al_1" && data["kind"] as? String == "syncError" && data["deviceId"] as? String == "d1")
        let resolved = try Self.body(StandardWebhooksFormat.self, alert("al_1", .syncError, .resolved), .resolve)
        #expect(resolved["type"] as? String == "alert.resolved")

        for notice in [IncidentBook.Notice.opened, .updated, .resolved] {
            let text = try #require(
                StandardWebhooksFormat.incidentBody(Self.incident, notice: notice, subscription: subscription(), now: Self.now, publicURL: nil)
            )
            let json = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            #expect(json["type"] as? String == "incident.\(notice.rawValue)")
            #expect((json["data"] as? [String: Any])?["id"] as? String == Self.incident.id)
        }
    }

    @Test("PagerDuty: a trigger with the facts in custom_details, and a resolve of the same dedup_key without a payload")
    func pagerDuty() throws {
        let trigger = try Self.body(PagerDutyFormat.self, alert("al_1", .syncError, .firing), .fire, hook: Self.pagerDuty)
        #expect(trigger["routing_key"] as? String == "R0UT1NG")
        #expect(trigger["event_action"] as? String == "trigger")
        #expect(trigger["dedup_key"] as? String == "al_1")
        let payload = try #require(trigger["payload"] as? [String: Any])
        #expect(payload["source"] as? String == "d1")
        #expect(payload["component"] as? String == "com.example")
        #expect(payload["group"] as? String == "iCloud.x")
        #expect(payload["timestamp"] as? String == t0.rfc3339)
        let details = try #require(payload["custom_details"] as? [String: String])
        #expect(details["alertId"] == "al_1" && details["pendingChanges"] == "3" && details["appVersion"] == "2.0")
        #expect(details["errorClass"] == SyncErrorReport(domain: "CKErrorDomain", code: 25).errorClass.rawValue)
        #expect(payload["class"] as? String == details["errorClass"])

        let resolve = try Self.body(PagerDutyFormat.self, alert("al_1", .syncError, .resolved), .resolve, hook: Self.pagerDuty)
        #expect(resolve["event_action"] as? String == "resolve" && resolve["dedup_key"] as? String == "al_1")
        #expect(resolve["payload"] == nil)

        let opened = PagerDutyFormat.event(Self.incident, notice: .opened, routingKey: "R")
        #expect(opened.event_action == "trigger" && opened.dedup_key == Self.incident.id)
        #expect(opened.payload?.custom_details["devices"] == "12")
        let closed = PagerDutyFormat.event(Self.incident, notice: .resolved, routingKey: "R")
        #expect(closed.event_action == "resolve" && closed.dedup_key == Self.incident.id && closed.payload == nil)
    }

    @Test("Alertmanager: one alert with labels, held five minutes while firing, ended at its resolve; no incidents")
    func alertmanager() throws {
        let firing = AlertmanagerFormat.alert(alert("al_1", .syncError, .firing), context: Self.context, now: Self.now)
        #expect(firing.labels["alertname"] == "syncError")
        #expect(firing.labels["device_id"] == "d1" && firing.labels["app_id"] == "com.example" && firing.labels["container_id"] == "iCloud.x")
        #expect(firing.labels["error_class"] == SyncErrorReport(domain: "CKErrorDomain", code: 25).errorClass.rawValue)
        #expect(firing.startsAt == t0.rfc3339)
        #expect(firing.endsAt == (Self.now + AlertmanagerFormat.hold).rfc3339)
        let resolved = AlertmanagerFormat.alert(alert("al_1", .syncError, .resolved), context: Self.context, now: Self.now)
        #expect(resolved.endsAt == (t0 + .seconds(5)).rfc3339, "the resolve's own time")
        let text = try #require(
            AlertmanagerFormat.alertBody(
                alert("al_1", .syncError, .firing),
                change: .fire,
                context: Self.context,
                subscription: subscription(),
                now: Self.now,
                publicURL: nil
            )
        )
        #expect((try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [Any])?.count == 1, "a list of one alert")
        #expect(AlertmanagerFormat.incidentBody(Self.incident, notice: .opened, subscription: subscription(), now: Self.now, publicURL: nil) == nil)
        #expect(AlertmanagerFormat.deliveryURL("http://am:9093//") == "http://am:9093/api/v2/alerts")
    }

    @Test("Slack: a headline in text and blocks; what a device sent cannot ping or link")
    func slack() throws {
        var hostile = alert("al_1", .syncError, .firing)
        hostile.containerId = "<!channel>"
        hostile.summary = "<https://evil.example|click>"
        let message = try Self.body(SlackFormat.self, hostile, .fire)
        let text = try #require(message["text"] as? String)
        #expect(!text.isEmpty)
        #expect((message["blocks"] as? [Any])?.isEmpty == false)
        let raw = try #require(
            SlackFormat.alertBody(hostile, change: .fire, context: Self.context, subscription: subscription(), now: Self.now, publicURL: nil)
        )
        #expect(!raw.contains("<!channel>") && !raw.contains("<https://evil.example"))
        let incident = try #require(
            SlackFormat.incidentBody(Self.incident, notice: .opened, subscription: subscription(), now: Self.now, publicURL: nil)
        )
        #expect(incident.contains("12"), "the incident names its devices")
    }

    @Test("every format writes the same bytes for the same input")
    func pure() {
        for format in [WebhookFormat.standardWebhooks, .slack, .pagerduty, .alertmanager] {
            let hook = format == .pagerduty ? Self.pagerDuty : subscription()
            let bodies = (0..<2).map { _ in
                format.alertFormat.alertBody(
                    alert("al_1", .syncError, .firing),
                    change: .fire,
                    context: Self.context,
                    subscription: hook,
                    now: Self.now,
                    publicURL: "https://s.example"
                )
            }
            #expect(bodies[0] != nil && bodies[0] == bodies[1], "\(format)")
        }
    }

    @Test("each format's default grouping: incidents for what people read, every transition for machines; a subscription's own wins")
    func defaultGrouping() {
        var hook = subscription()
        for (format, grouping) in [
            (WebhookFormat.slack, WebhookGrouping.incident), (.pagerduty, .incident), (.standardWebhooks, .device), (.alertmanager, .device),
        ] {
            hook.format = format
            hook.grouping = nil
            #expect(hook.effectiveGrouping == grouping, "\(format)")
            hook.grouping = grouping == .incident ? .device : .incident
            #expect(hook.effectiveGrouping != grouping, "\(format): the subscription's own")
        }
    }
}
