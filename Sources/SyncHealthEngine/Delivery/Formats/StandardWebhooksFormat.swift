import SyncHealthCore
import SyncHealthStore
import SyncHealthWebhooks

/// Standard Webhooks: the API's own JSON in an envelope (`alert.firing`, `incident.opened`, ...), signed with the
/// subscription's secret (`webhook-id`, `webhook-timestamp`, `webhook-signature`).
enum StandardWebhooksFormat: AlertFormat {
    /// Machines read every transition.
    static let defaultGrouping = WebhookGrouping.device

    struct Envelope<Data: Encodable>: Encodable {
        let type: String
        let timestamp: String
        let data: Data
    }

    static func alertBody(
        _ alert: AlertRecord,
        change: AlertTransition.Change,
        context: AlertContext,
        subscription: WebhookSubscription,
        now: Timestamp,
        publicURL: String?
    ) -> String? {
        encode(WebhookPayload(type: change == .fire ? "alert.firing" : "alert.resolved", timestamp: now.rfc3339, data: AlertJSON(alert)))
    }

    static func incidentBody(
        _ incident: IncidentRecord,
        notice: IncidentBook.Notice,
        subscription: WebhookSubscription,
        now: Timestamp,
        publicURL: String?
    ) -> String? {
        encode(Envelope(type: "incident.\(notice.rawValue)", timestamp: now.rfc3339, data: IncidentJSON(incident)))
    }

    /// Signed: `nil` when the subscription's secret is unusable.
    static func target(
        _ subscription: WebhookSubscription,
        messageId: String,
        body: [UInt8],
        now: Timestamp
    )
        -> (url: String, headers: [(name: String, value: String)])?
    {
        guard let signer = WebhookSigner(secret: subscription.secret) else { return nil }
        return (subscription.url, signer.headers(id: messageId, timestamp: now.unixSeconds, body: body))
    }
}
