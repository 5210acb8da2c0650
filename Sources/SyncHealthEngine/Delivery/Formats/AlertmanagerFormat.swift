import SyncHealthCore
import SyncHealthStore

/// Alertmanager's `POST /api/v2/alerts`: labels and annotations, held active until `endsAt`. Alertmanager groups
/// alerts itself (`group_by`), so it takes no incidents; `AlertmanagerRefresh` posts firing alerts again before
/// their hold runs out.
enum AlertmanagerFormat: AlertFormat {
    /// Alertmanager groups alerts itself (`group_by`).
    static let defaultGrouping = WebhookGrouping.device

    /// How long an Alertmanager alert stays active without news; the refresh posts it again well before.
    static let hold: Duration = .seconds(300)

    struct Alert: Encodable {
        var labels: [String: String]
        var annotations: [String: String]
        var startsAt: String
        var endsAt: String
    }

    static func validate(routingKey: String?, grouping: WebhookGrouping?) throws(WebhookError) {
        if grouping == .incident {
            throw WebhookError.invalidField(
                pointer: "/grouping",
                detail: "Alertmanager groups alerts itself: use device (its group_by does the rest)"
            )
        }
    }

    /// An Alertmanager's `POST /api/v2/alerts`, from its base URL.
    static func deliveryURL(_ base: String) -> String {
        var base = base
        while base.hasSuffix("/") { base.removeLast() }
        return base + "/api/v2/alerts"
    }

    static func alertBody(
        _ alert: AlertRecord,
        change: AlertTransition.Change,
        context: AlertContext,
        subscription: WebhookSubscription,
        now: Timestamp,
        publicURL: String?
    ) -> String? {
        encode([self.alert(alert, context: context, now: now)])
    }

    static func incidentBody(
        _ incident: IncidentRecord,
        notice: IncidentBook.Notice,
        subscription: WebhookSubscription,
        now: Timestamp,
        publicURL: String?
    ) -> String? { nil }

    /// One alert: a firing one holds for `hold` unless posted again, a resolved one ends at its resolve.
    static func alert(_ alert: AlertRecord, context: AlertContext, now: Timestamp) -> Alert {
        var labels = ["alertname": alert.kind.rawValue, "severity": AlertMessage.severity(alert, context)]
        labels["app_id"] = alert.appId
        labels["container_id"] = alert.containerId
        labels["device_id"] = alert.deviceId
        labels["app_version"] = alert.appVersion
        labels["error_class"] = context.errorClass?.rawValue
        let endsAt = alert.state == .resolved ? (alert.endsAt ?? now) : now + hold
        return Alert(
            labels: labels,
            annotations: ["summary": alert.summary, "description": alert.detail],
            startsAt: alert.startsAt.rfc3339,
            endsAt: endsAt.rfc3339
        )
    }
}
