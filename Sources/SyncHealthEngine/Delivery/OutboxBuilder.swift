import Foundation
import SyncHealthCore
public import SyncHealthStore

/// Outbox messages for alert transitions.
enum OutboxBuilder {
    /// Sorted keys, so that the same alert is always the same bytes.
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// The messages for one alert change on `line`, one per interested subscription, each in its subscription's
    /// format. Messages of one line are delivered in order.
    static func messages(
        for alert: AlertRecord,
        change: AlertTransition.Change,
        line: AlertLine,
        context: AlertContext,
        subscribers: [WebhookSubscription],
        now: Timestamp,
        publicURL: String? = nil
    ) -> [OutboxMessage] {
        let orderingKey = OutboxLine.alert(line)
        return subscribers.compactMap { subscription in
            guard
                let body = AlertMessage.body(
                    subscription.format,
                    alert: alert,
                    change: change,
                    context: context,
                    subscription: subscription,
                    now: now,
                    publicURL: publicURL
                )
            else { return nil }
            // Deterministic, so that the same transition written twice is one message (and one webhook-id).
            return OutboxMessage(
                id: "msg_" + AlertIdentity.digest([alert.id, change.rawValue, subscription.id]),
                webhookId: subscription.id,
                orderingKey: orderingKey,
                payload: body,
                createdAt: now,
                nextAttemptAt: now
            )
        }
    }
}

/// `{"type", "timestamp", "data": {alert}}`.
struct WebhookPayload: Encodable {
    let type: String
    let timestamp: String
    let data: AlertJSON
}

/// An alert as the API and webhooks show it:
/// `{"id", "kind", "state", "deviceId", "appId", "containerId", "startsAt", "endsAt", "summary", "detail"}`, and
/// `reason` when an alert resolved for another reason than its condition ending (`ResolveReason`), and `appVersion`
/// for a release's alert.
public struct AlertJSON: Encodable, Sendable {
    let alert: AlertRecord
    /// The silences holding the alert's deliveries, for the API (webhook bodies leave it out).
    let silencedBy: [String]?

    /// Wraps an alert.
    public init(_ alert: AlertRecord) {
        self.alert = alert
        self.silencedBy = nil
    }

    /// Wraps an alert with the silences in force over it.
    public init(_ alert: AlertRecord, silencedBy: [String]) {
        self.alert = alert
        self.silencedBy = silencedBy
    }

    enum Key: String, CodingKey {
        case id, kind, state, deviceId, appId, appVersion, containerId, startsAt, endsAt, summary, detail, reason, silencedBy
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(alert.id, forKey: .id)
        try c.encode(alert.kind.rawValue, forKey: .kind)
        try c.encode(alert.state.rawValue, forKey: .state)
        try c.encode(alert.deviceId, forKey: .deviceId)
        try c.encode(alert.appId, forKey: .appId)
        if let appVersion = alert.appVersion { try c.encode(appVersion, forKey: .appVersion) }
        try c.encode(alert.containerId, forKey: .containerId)
        try c.encode(alert.startsAt.rfc3339, forKey: .startsAt)
        try c.encode(alert.endsAt?.rfc3339, forKey: .endsAt)
        try c.encode(alert.summary, forKey: .summary)
        try c.encode(alert.detail, forKey: .detail)
        if let reason = alert.reason { try c.encode(reason.rawValue, forKey: .reason) }
        if let silencedBy { try c.encode(silencedBy, forKey: .silencedBy) }
    }
}
