import Foundation
import SyncHealthCore
public import SyncHealthStore

/// One destination's wire format: the bodies of its alert and incident messages, where they go with which headers,
/// and what a subscription of it must have. A new destination is a type conforming to this in a file of its own,
/// and a case of `WebhookFormat` mapped to it in `WebhookFormat.alertFormat`. Pure: the same input gives the same
/// bytes.
protocol AlertFormat {
    /// What a subscription of this format gets unless it says: incidents for the formats people read, every
    /// transition for machines and for receivers that group by themselves.
    static var defaultGrouping: WebhookGrouping { get }

    /// The body of one alert's message (a device's, a fleet's or a release's); `nil` if it cannot be written (it
    /// then is not sent).
    static func alertBody(
        _ alert: AlertRecord,
        change: AlertTransition.Change,
        context: AlertContext,
        subscription: WebhookSubscription,
        now: Timestamp,
        publicURL: String?
    ) -> String?

    /// The body of one incident message; `nil` for a format that does not take incidents.
    static func incidentBody(
        _ incident: IncidentRecord,
        notice: IncidentBook.Notice,
        subscription: WebhookSubscription,
        now: Timestamp,
        publicURL: String?
    ) -> String?

    /// Where a subscription's message goes, and its headers; `nil` when the subscription cannot be sent to.
    static func target(
        _ subscription: WebhookSubscription,
        messageId: String,
        body: [UInt8],
        now: Timestamp
    )
        -> (url: String, headers: [(name: String, value: String)])?

    /// The URL messages go to, from the subscription's: what the SSRF guard checks when it is created.
    static func deliveryURL(_ url: String) -> String

    /// Refuses a new subscription's fields this format cannot work with.
    static func validate(routingKey: String?, grouping: WebhookGrouping?) throws(WebhookError)
}

extension AlertFormat {
    static func deliveryURL(_ url: String) -> String { url }
    static func validate(routingKey: String?, grouping: WebhookGrouping?) throws(WebhookError) {}

    /// Plain JSON to the subscription's URL: the providers' formats.
    static func target(
        _ subscription: WebhookSubscription,
        messageId: String,
        body: [UInt8],
        now: Timestamp
    )
        -> (url: String, headers: [(name: String, value: String)])?
    {
        (deliveryURL(subscription.url), [(name: "content-type", value: "application/json")])
    }

    /// `value` as the messages' JSON.
    static func encode(_ value: some Encodable) -> String? {
        (try? OutboxBuilder.encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) }
    }
}

extension WebhookSubscription {
    /// The grouping in force: the subscription's, or its format's default.
    public var effectiveGrouping: WebhookGrouping { grouping ?? format.alertFormat.defaultGrouping }
}

extension WebhookFormat {
    /// The format's messages, addresses and rules.
    var alertFormat: any AlertFormat.Type {
        switch self {
        case .standardWebhooks: StandardWebhooksFormat.self
        case .slack: SlackFormat.self
        case .pagerduty: PagerDutyFormat.self
        case .alertmanager: AlertmanagerFormat.self
        }
    }
}
