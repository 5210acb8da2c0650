import Foundation
public import SyncHealthCore
import SyncHealthStore

/// What the formats' incident messages share: the dispatch to the subscription's format, the outbox rows, and the
/// words (headline, versions, advice). Each format's body is in `Delivery/Formats/` (`AlertFormat`).
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
        format.alertFormat.incidentBody(incident, notice: notice, subscription: subscription, now: now, publicURL: publicURL)
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
                orderingKey: .incident(incident.key),
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
        let devices = incident.key.attestedOnly ? "attested devices" : "devices"
        switch notice {
        case .opened where incident.flappingSince != nil:
            return "🔴 \(what(incident.key)) on \(incident.devices) \(devices) of \(scope), flapping: held open until its devices are quiet"
        case .opened: return "🔴 \(what(incident.key)) on \(incident.devices) \(devices) of \(scope)"
        case .updated: return "🟠 \(what(incident.key)) now on \(incident.devices) \(devices) of \(scope)"
        case .resolved: return "✅ Resolved: \(what(incident.key)) on \(scope), at most \(incident.peakDevices) \(devices)"
        }
    }
}

/// An incident as the API and webhooks show it.
public struct IncidentJSON: Encodable, Sendable {
    let incident: IncidentRecord

    /// Wraps an incident.
    public init(_ incident: IncidentRecord) { self.incident = incident }

    enum Key: String, CodingKey {
        case id, state, appId, containerId, kind, error, devices, peakDevices, byAppVersion, sampleDevices, openedAt, resolvedAt, notifiedAt
        case flappingSince, quietSince, history, attestedOnly
    }

    struct PointJSON: Encodable {
        let at: String
        let devices: Int
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
        try c.encode(i.flappingSince?.rfc3339, forKey: .flappingSince)
        try c.encode(i.quietSince?.rfc3339, forKey: .quietSince)
        try c.encode(i.history.map { PointJSON(at: $0.at.rfc3339, devices: $0.devices) }, forKey: .history)
        // Only on incidents of attested devices: those of every device read as they did before App Attest.
        if i.key.attestedOnly { try c.encode(true, forKey: .attestedOnly) }
    }
}
