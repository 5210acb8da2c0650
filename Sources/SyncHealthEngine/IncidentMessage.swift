import Foundation
public import SyncHealthCore
import SyncHealthStore

/// The body of one incident message in each subscription format. Pure: the same incident gives the same bytes.
enum IncidentMessage {
    /// The body for `format`; `nil` for a format that does not take incidents (Alertmanager groups by itself).
    static func body(
        _ format: WebhookFormat,
        incident: IncidentRecord,
        notice: IncidentBook.Notice,
        subscription: WebhookSubscription,
        now: Timestamp,
        publicURL: String? = nil
    ) -> String? {
        switch format {
        case .standardWebhooks:
            return AlertMessage.encode(Envelope(type: "incident.\(notice.rawValue)", timestamp: now.rfc3339, data: IncidentJSON(incident)))
        case .slack:
            return AlertMessage.encode(slack(incident, notice: notice, publicURL: publicURL))
        case .pagerduty:
            return AlertMessage.encode(pagerDuty(incident, notice: notice, routingKey: subscription.routingKey ?? ""))
        case .alertmanager:
            return nil
        }
    }

    /// The message's outbox rows, one per subscription, each with an id that names the incident, the message's number
    /// and the subscription: whichever replica writes it, it is one message.
    static func messages(
        _ incident: IncidentRecord,
        notice: IncidentBook.Notice,
        subscribers: [WebhookSubscription],
        now: Timestamp,
        publicURL: String?
    ) -> [OutboxMessage] {
        subscribers.compactMap { subscription in
            guard let body = body(subscription.format, incident: incident, notice: notice, subscription: subscription, now: now, publicURL: publicURL)
            else { return nil }
            return OutboxMessage(
                id: "msg_" + AlertIdentity.digest([incident.id, String(incident.messages), subscription.id]),
                webhookId: subscription.id,
                orderingKey: "i\u{1}" + incident.key.identity,
                payload: body,
                createdAt: now,
                nextAttemptAt: now
            )
        }
    }

    /// What an incident is about, in words: `syncError CKErrorDomain 5 (badContainer)`.
    static func what(_ key: IncidentKey) -> String {
        guard let signature = key.signature else { return key.kind.rawValue }
        return "\(key.kind.rawValue) " + SyncErrorReport(domain: signature.domain, code: signature.code).displayName
    }

    /// The advice for the incident's error, if it has one.
    static func advice(_ key: IncidentKey) -> ErrorAdvice? {
        key.signature.flatMap { SyncErrorReport(domain: $0.domain, code: $0.code).advice }
    }

    /// `2.0: 60, 1.9: 2`, most devices first.
    static func versions(_ incident: IncidentRecord) -> String {
        incident.byVersion.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
            .map { "\($0.key.isEmpty ? "unknown" : $0.key): \($0.value)" }.joined(separator: ", ")
    }

    static func headline(_ incident: IncidentRecord, notice: IncidentBook.Notice) -> String {
        let scope = incident.key.appId + (incident.key.containerId.map { " (\($0))" } ?? "")
        switch notice {
        case .opened: return "🔴 \(what(incident.key)) on \(incident.devices) devices of \(scope)"
        case .updated: return "🟠 \(what(incident.key)) now on \(incident.devices) devices of \(scope)"
        case .resolved: return "✅ Resolved: \(what(incident.key)) on \(scope), at most \(incident.peakDevices) devices"
        }
    }

    // MARK: Standard Webhooks

    struct Envelope: Encodable {
        let type: String
        let timestamp: String
        let data: IncidentJSON
    }

    // MARK: Slack

    static func slack(_ incident: IncidentRecord, notice: IncidentBook.Notice, publicURL: String?) -> AlertMessage.Slack {
        let headline = headline(incident, notice: notice)
        var fields: [AlertMessage.Slack.Text] = [
            .init(type: "mrkdwn", text: "*Devices*\n\(incident.devices) (at most \(incident.peakDevices))"),
            .init(type: "mrkdwn", text: "*Since*\n\(incident.openedAt.rfc3339)"),
        ]
        if !incident.byVersion.isEmpty { fields.append(.init(type: "mrkdwn", text: "*App versions*\n\(versions(incident))")) }
        if !incident.samples.isEmpty { fields.append(.init(type: "mrkdwn", text: "*For example*\n\(incident.samples.joined(separator: ", "))")) }
        var blocks: [AlertMessage.Slack.Block] = [
            .init(type: "section", text: .init(type: "mrkdwn", text: "*\(headline)*")),
            .init(type: "section", fields: fields),
        ]
        if let advice = advice(incident.key) {
            blocks.append(.init(type: "section", text: .init(type: "mrkdwn", text: "*What to do* (\(advice.who.rawValue)): \(advice.text)")))
        }
        if let base = publicURL.map({ $0.hasSuffix("/") ? String($0.dropLast()) : $0 }) {
            blocks.append(.init(type: "section", text: .init(type: "mrkdwn", text: "<\(base)/#/alerts|Open the incidents on the dashboard>")))
        }
        blocks.append(.init(type: "context", elements: [.init(type: "mrkdwn", text: "SyncHealth incident `\(incident.id)`")]))
        return AlertMessage.Slack(text: headline, blocks: blocks)
    }

    // MARK: PagerDuty

    static func pagerDuty(_ incident: IncidentRecord, notice: IncidentBook.Notice, routingKey: String) -> AlertMessage.PagerDuty {
        guard notice != .resolved else { return AlertMessage.PagerDuty(routing_key: routingKey, event_action: "resolve", dedup_key: incident.id) }
        var details = [
            "incidentId": incident.id, "kind": incident.key.kind.rawValue, "devices": String(incident.devices),
            "appVersions": versions(incident), "sampleDevices": incident.samples.joined(separator: ", "),
        ]
        if let signature = incident.key.signature {
            let error = SyncErrorReport(domain: signature.domain, code: signature.code)
            details["error"] = error.displayName
            details["errorClass"] = error.errorClass.rawValue
        }
        if let advice = advice(incident.key) {
            details["advice"] = advice.text
            details["adviceWho"] = advice.who.rawValue
        }
        let errorClass = incident.key.signature.map { SyncErrorReport(domain: $0.domain, code: $0.code).errorClass }
        let payload = AlertMessage.PagerDuty.Payload(
            summary: String(headline(incident, notice: notice).prefix(1024)),
            source: incident.key.appId,
            severity: errorClass == .dataLoss ? "critical" : errorClass == .developer ? "error" : "warning",
            timestamp: incident.openedAt.rfc3339,
            component: incident.key.appId,
            group: incident.key.containerId,
            class: errorClass?.rawValue ?? incident.key.kind.rawValue,
            custom_details: details
        )
        return AlertMessage.PagerDuty(routing_key: routingKey, event_action: "trigger", dedup_key: incident.id, payload: payload)
    }
}

/// An incident as the API and webhooks show it.
public struct IncidentJSON: Encodable, Sendable {
    let incident: IncidentRecord

    /// Wraps an incident.
    public init(_ incident: IncidentRecord) { self.incident = incident }

    enum Key: String, CodingKey {
        case id, state, appId, containerId, kind, error, devices, peakDevices, byAppVersion, sampleDevices, openedAt, resolvedAt, notifiedAt
    }

    struct ErrorJSON: Encodable {
        let domain: String
        let code: Int
        let name: String?
        let `class`: String
        let advice: ErrorAdvice?

        enum Key: String, CodingKey { case domain, code, name, `class`, advice }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Key.self)
            try c.encode(domain, forKey: .domain)
            try c.encode(code, forKey: .code)
            try c.encode(name, forKey: .name)
            try c.encode(self.class, forKey: .class)
            try c.encode(advice.map { ["who": $0.who.rawValue, "text": $0.text] }, forKey: .advice)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        let i = incident
        try c.encode(i.id, forKey: .id)
        try c.encode(i.state.rawValue, forKey: .state)
        try c.encode(i.key.appId, forKey: .appId)
        try c.encode(i.key.containerId, forKey: .containerId)
        try c.encode(i.key.kind.rawValue, forKey: .kind)
        let error = i.key.signature.map { s -> ErrorJSON in
            let report = SyncErrorReport(domain: s.domain, code: s.code)
            return ErrorJSON(domain: s.domain, code: s.code, name: report.cloudKitName, class: report.errorClass.rawValue, advice: report.advice)
        }
        try c.encode(error, forKey: .error)
        try c.encode(i.devices, forKey: .devices)
        try c.encode(i.peakDevices, forKey: .peakDevices)
        try c.encode(i.byVersion, forKey: .byAppVersion)
        try c.encode(i.samples, forKey: .sampleDevices)
        try c.encode(i.openedAt.rfc3339, forKey: .openedAt)
        try c.encode(i.resolvedAt?.rfc3339, forKey: .resolvedAt)
        try c.encode(i.notifiedAt?.rfc3339, forKey: .notifiedAt)
    }
}
