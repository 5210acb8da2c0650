import Foundation
import SyncHealthCore
import SyncHealthStore

/// The body of one alert message in each subscription format. Pure: the same alert gives the same bytes.
enum AlertMessage {
    /// How long an Alertmanager alert stays active without news; the refresh posts it again well before.
    static let alertmanagerHold: Duration = .seconds(300)

    /// The body for `format`; `nil` if it cannot be written (it then is not sent).
    static func body(
        _ format: WebhookFormat,
        alert: AlertRecord,
        change: AlertTransition.Change,
        context: AlertContext,
        subscription: WebhookSubscription,
        now: Timestamp,
        publicURL: String? = nil
    ) -> String? {
        switch format {
        case .standardWebhooks:
            return encode(WebhookPayload(type: change == .fire ? "alert.firing" : "alert.resolved", timestamp: now.rfc3339, data: AlertJSON(alert)))
        case .slack:
            return encode(slack(alert, change: change, context: context, publicURL: publicURL))
        case .pagerduty:
            return encode(pagerDuty(alert, change: change, context: context, routingKey: subscription.routingKey ?? ""))
        case .alertmanager:
            return encode([alertmanager(alert, context: context, now: now)])
        }
    }

    /// PagerDuty's severity, and Alertmanager's `severity` label.
    static func severity(_ alert: AlertRecord, _ context: AlertContext) -> String {
        // A release that breaks sync breaks it for everyone who updates.
        guard alert.kind != .releaseRegression else { return "error" }
        return switch context.errorClass {
        case .dataLoss?: "critical"
        case .developer?: "error"
        default: "warning"
        }
    }

    // MARK: Slack

    struct Slack: Encodable {
        struct Text: Encodable {
            var type: String
            var text: String
        }
        struct Block: Encodable {
            var type: String
            var text: Text?
            var fields: [Text]?
            var elements: [Text]?
        }
        var text: String
        var blocks: [Block]
    }

    /// The alert's page on the dashboard under `publicURL`: the device, or a fleet alert's broken devices.
    static func dashboardLink(_ alert: AlertRecord, publicURL: String?) -> String? {
        guard var base = publicURL?.trimmingCharacters(in: .whitespaces), !base.isEmpty else { return nil }
        while base.hasSuffix("/") { base.removeLast() }
        let encode = { (text: String) in
            text.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed.subtracting(["&", "=", "#", "?", "/"])) ?? text
        }
        if let appId = alert.appId, let deviceId = alert.deviceId {
            return "\(base)/#/device/\(encode(appId))/\(encode(deviceId))"
        }
        if alert.kind == .releaseRegression, let appId = alert.appId {
            return "\(base)/#/releases?appId=\(encode(appId))"
        }
        return "\(base)/#/devices?broken=true" + (alert.containerId.map { "&containerId=\(encode($0))" } ?? "")
    }

    static func slack(_ alert: AlertRecord, change: AlertTransition.Change, context: AlertContext, publicURL: String? = nil) -> Slack {
        let firing = change == .fire
        let headline = "\(firing ? "🔴" : "✅") \(alert.kind.rawValue) \(firing ? "firing" : "resolved"): \(alert.summary)"
        var fields: [Slack.Text] = []
        if let device = alert.deviceId { fields.append(.init(type: "mrkdwn", text: "*Device*\n\(device)")) }
        if let app = alert.appId { fields.append(.init(type: "mrkdwn", text: "*App*\n\(app)")) }
        if let version = alert.appVersion { fields.append(.init(type: "mrkdwn", text: "*Release*\n\(version)")) }
        if let container = alert.containerId { fields.append(.init(type: "mrkdwn", text: "*Container*\n\(container)")) }
        if let error = context.error {
            fields.append(.init(type: "mrkdwn", text: "*Error*\n\(error.errorClass.rawValue): \(error.displayName)"))
        }
        fields.append(
            .init(type: "mrkdwn", text: firing ? "*Since*\n\(alert.startsAt.rfc3339)" : "*Resolved at*\n\((alert.endsAt ?? alert.startsAt).rfc3339)")
        )
        var blocks: [Slack.Block] = [
            .init(type: "section", text: .init(type: "mrkdwn", text: "*\(headline)*\n\(alert.detail)")),
            .init(type: "section", fields: fields),
        ]
        if let advice = context.error?.advice {
            blocks.append(.init(type: "section", text: .init(type: "mrkdwn", text: "*What to do* (\(advice.who.rawValue)): \(advice.text)")))
        }
        let link = dashboardLink(alert, publicURL: publicURL)
        if let link {
            let label =
                alert.deviceId != nil
                ? "Open the device on the dashboard"
                : alert.kind == .releaseRegression ? "Open the app's releases on the dashboard" : "Open the broken devices on the dashboard"
            blocks.append(.init(type: "section", text: .init(type: "mrkdwn", text: "<\(link)|\(label)>")))
        }
        blocks.append(.init(type: "context", elements: [.init(type: "mrkdwn", text: "SyncHealth alert `\(alert.id)`")]))
        // The plain URL in `text` too: Mattermost and Rocket.Chat show `text` and link it themselves.
        return Slack(text: link.map { "\(headline)\n\($0)" } ?? headline, blocks: blocks)
    }

    // MARK: PagerDuty

    struct PagerDuty: Encodable {
        struct Payload: Encodable {
            var summary: String
            var source: String
            var severity: String
            var timestamp: String
            var component: String?
            var group: String?
            var `class`: String
            var custom_details: [String: String]
        }
        var routing_key: String
        var event_action: String
        var dedup_key: String
        var payload: Payload?
    }

    static func pagerDuty(_ alert: AlertRecord, change: AlertTransition.Change, context: AlertContext, routingKey: String) -> PagerDuty {
        guard change == .fire else { return PagerDuty(routing_key: routingKey, event_action: "resolve", dedup_key: alert.id) }
        var details = ["kind": alert.kind.rawValue, "detail": alert.detail, "alertId": alert.id]
        if let v = context.summary { details["syncStateSummary"] = v.rawValue }
        if let v = context.error {
            details["error"] = v.displayName
            details["errorClass"] = v.errorClass.rawValue
            if let advice = v.advice {
                details["advice"] = advice.text
                details["adviceWho"] = advice.who.rawValue
            }
        }
        if let v = context.pendingChanges { details["pendingChanges"] = String(v) }
        if let v = context.info?.platform { details["platform"] = v }
        if let v = context.info?.osVersion { details["osVersion"] = v }
        if let v = context.info?.appVersion { details["appVersion"] = v }
        let payload = PagerDuty.Payload(
            summary: String(alert.summary.prefix(1024)),
            source: alert.deviceId ?? alert.containerId ?? alert.appId ?? "synchealth",
            severity: severity(alert, context),
            timestamp: alert.startsAt.rfc3339,
            component: alert.appId ?? alert.containerId,
            group: alert.containerId,
            class: context.errorClass?.rawValue ?? alert.kind.rawValue,
            custom_details: details
        )
        return PagerDuty(routing_key: routingKey, event_action: "trigger", dedup_key: alert.id, payload: payload)
    }

    // MARK: Alertmanager

    struct AlertmanagerAlert: Encodable {
        var labels: [String: String]
        var annotations: [String: String]
        var startsAt: String
        var endsAt: String
    }

    /// One alert for `POST /api/v2/alerts`: a firing one holds for `alertmanagerHold` unless posted again, a resolved
    /// one ends at its resolve.
    static func alertmanager(_ alert: AlertRecord, context: AlertContext, now: Timestamp) -> AlertmanagerAlert {
        var labels = ["alertname": alert.kind.rawValue, "severity": severity(alert, context)]
        labels["app_id"] = alert.appId
        labels["container_id"] = alert.containerId
        labels["device_id"] = alert.deviceId
        labels["app_version"] = alert.appVersion
        labels["error_class"] = context.errorClass?.rawValue
        let endsAt = alert.state == .resolved ? (alert.endsAt ?? now) : now + alertmanagerHold
        return AlertmanagerAlert(
            labels: labels,
            annotations: ["summary": alert.summary, "description": alert.detail],
            startsAt: alert.startsAt.rfc3339,
            endsAt: endsAt.rfc3339
        )
    }

    static func encode(_ value: some Encodable) -> String? {
        (try? OutboxBuilder.encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) }
    }
}
