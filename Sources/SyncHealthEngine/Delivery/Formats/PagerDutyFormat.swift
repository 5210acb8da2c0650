import SyncHealthCore
import SyncHealthStore

/// PagerDuty's Events API v2: a trigger, or a resolve, for one `dedup_key` (the alert's id, or the incident's),
/// sent with the subscription's integration `routingKey`.
enum PagerDutyFormat: AlertFormat {
    /// People are paged: one page an incident.
    static let defaultGrouping = WebhookGrouping.incident

    struct Event: Encodable {
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

    static func validate(routingKey: String?, grouping: WebhookGrouping?) throws(WebhookError) {
        if routingKey == nil {
            throw WebhookError.invalidField(pointer: "/routingKey", detail: "the pagerduty format needs the integration's routingKey")
        }
    }

    static func alertBody(
        _ alert: AlertRecord,
        change: AlertTransition.Change,
        context: AlertContext,
        subscription: WebhookSubscription,
        now: Timestamp,
        publicURL: String?
    ) -> String? {
        encode(event(alert, change: change, context: context, routingKey: subscription.routingKey ?? ""))
    }

    static func incidentBody(
        _ incident: IncidentRecord,
        notice: IncidentBook.Notice,
        subscription: WebhookSubscription,
        now: Timestamp,
        publicURL: String?
    ) -> String? {
        encode(event(incident, notice: notice, routingKey: subscription.routingKey ?? ""))
    }

    static func event(_ alert: AlertRecord, change: AlertTransition.Change, context: AlertContext, routingKey: String) -> Event {
        guard change == .fire else { return Event(routing_key: routingKey, event_action: "resolve", dedup_key: alert.id) }
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
        let payload = Event.Payload(
            summary: String(alert.summary.prefix(1024)),
            source: alert.deviceId ?? alert.containerId ?? alert.appId ?? "synchealth",
            severity: AlertMessage.severity(alert, context),
            timestamp: alert.startsAt.rfc3339,
            component: alert.appId ?? alert.containerId,
            group: alert.containerId,
            class: context.errorClass?.rawValue ?? alert.kind.rawValue,
            custom_details: details
        )
        return Event(routing_key: routingKey, event_action: "trigger", dedup_key: alert.id, payload: payload)
    }

    static func event(_ incident: IncidentRecord, notice: IncidentBook.Notice, routingKey: String) -> Event {
        guard notice != .resolved else { return Event(routing_key: routingKey, event_action: "resolve", dedup_key: incident.id) }
        var details = [
            "incidentId": incident.id, "kind": incident.key.kind.rawValue, "devices": String(incident.devices),
            "appVersions": IncidentMessage.versions(incident), "sampleDevices": incident.samples.joined(separator: ", "),
        ]
        if let signature = incident.key.signature {
            let error = SyncErrorReport(domain: signature.domain, code: signature.code)
            details["error"] = error.displayName
            details["errorClass"] = error.errorClass.rawValue
        }
        if let advice = IncidentMessage.advice(incident.key) {
            details["advice"] = advice.text
            details["adviceWho"] = advice.who.rawValue
        }
        let errorClass = incident.key.signature.map { SyncErrorReport(domain: $0.domain, code: $0.code).errorClass }
        let payload = Event.Payload(
            summary: String(IncidentMessage.headline(incident, notice: notice).prefix(1024)),
            source: incident.key.appId,
            severity: errorClass == .dataLoss ? "critical" : errorClass == .developer ? "error" : "warning",
            timestamp: incident.openedAt.rfc3339,
            component: incident.key.appId,
            group: incident.key.containerId,
            class: errorClass?.rawValue ?? incident.key.kind.rawValue,
            custom_details: details
        )
        return Event(routing_key: routingKey, event_action: "trigger", dedup_key: incident.id, payload: payload)
    }
}
