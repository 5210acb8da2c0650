import Foundation
public import SyncHealthCore

/// What a subscription's messages look like, and where they go.
public enum WebhookFormat: String, Sendable, Hashable, CaseIterable, Codable {
    /// The service's own envelope, signed per Standard Webhooks, posted to `url`.
    case standardWebhooks
    /// A Slack incoming-webhook message (`text` and `blocks`); Mattermost and Rocket.Chat take it too.
    case slack
    /// A PagerDuty Events API v2 event, keyed by the subscription's `routingKey`.
    case pagerduty
    /// Alertmanager alerts, posted to `url` + `/api/v2/alerts`, and posted again while they fire.
    case alertmanager
}

/// Whether a subscription hears of each device's alert, or of incidents (`IncidentBook`).
public enum WebhookGrouping: String, Sendable, Hashable, CaseIterable, Codable {
    /// One message per incident: when it opens (after the group wait), as its device count changes (at most every
    /// group interval), and when it resolves.
    case incident
    /// One message per device alert transition.
    case device
}

/// A webhook subscription.
public struct WebhookSubscription: Sendable, Hashable {
    /// `wh_` + random.
    public var id: String
    /// Where deliveries go.
    public var url: String
    /// Alert kinds delivered; empty means all.
    public var kinds: [AlertKind]
    /// Free text.
    public var description: String?
    /// `whsec_` + base64; shown only when created.
    public var secret: String
    /// When it was created.
    public var createdAt: Timestamp
    /// Why it was disabled (e.g. the receiver answered 410), or `nil` while active.
    public var disabledReason: String?
    /// The body and target of its messages.
    public var format: WebhookFormat
    /// PagerDuty's integration key (`routing_key`), for the `pagerduty` format.
    public var routingKey: String?
    /// Apps whose alerts are delivered; empty means all.
    public var appIds: [String]
    /// Containers whose alerts are delivered; empty means all.
    public var containerIds: [String]
    /// Error classes whose alerts are delivered (an alert's class is its device's worst visible error); empty means all.
    public var errorClasses: [ErrorClass]
    /// Incidents or device alerts; `nil` takes the format's default (`effectiveGrouping`, in the engine, where the
    /// formats are).
    public var grouping: WebhookGrouping?
    /// Only what attested devices show (App Attest): their own alerts, and incidents counted over them alone. Fleet
    /// and release alerts, which every device's reports move, are not delivered.
    public var attestedOnly: Bool

    /// Creates a subscription.
    public init(
        id: String,
        url: String,
        kinds: [AlertKind],
        description: String?,
        secret: String,
        createdAt: Timestamp,
        disabledReason: String? = nil,
        format: WebhookFormat = .standardWebhooks,
        routingKey: String? = nil,
        appIds: [String] = [],
        containerIds: [String] = [],
        errorClasses: [ErrorClass] = [],
        grouping: WebhookGrouping? = nil,
        attestedOnly: Bool = false
    ) {
        self.id = id
        self.url = url
        self.kinds = kinds
        self.description = description
        self.secret = secret
        self.createdAt = createdAt
        self.disabledReason = disabledReason
        self.format = format
        self.routingKey = routingKey
        self.appIds = appIds
        self.containerIds = containerIds
        self.errorClasses = errorClasses
        self.grouping = grouping
        self.attestedOnly = attestedOnly
    }

    /// Whether an alert goes to this subscription: it is active, every list it has names the alert's kind, app,
    /// container and error class (an alert without an app, container or class matches only empty lists), and, if
    /// it asks for `attestedOnly`, the alert is an attested device's.
    public func wants(_ alert: AlertRecord, errorClass: ErrorClass?, attested: Bool) -> Bool {
        func matches<T: Equatable>(_ list: [T], _ value: T?) -> Bool { list.isEmpty || value.map(list.contains) == true }
        return disabledReason == nil && matches(kinds, alert.kind) && matches(appIds, alert.appId) && matches(containerIds, alert.containerId)
            && matches(errorClasses, errorClass) && (!attestedOnly || attested)
    }
}

extension WebhookSubscription {
    /// The fields kept in the `options` column, as JSON: new ones join without a migration.
    struct Options: Codable {
        var format: WebhookFormat?
        var routingKey: String?
        var appIds: [String]?
        var containerIds: [String]?
        var errorClasses: [ErrorClass]?
        var grouping: WebhookGrouping?
        var attestedOnly: Bool?
    }

    /// The stored JSON of the options.
    public var optionsJSON: String {
        let options = Options(
            format: format,
            routingKey: routingKey,
            appIds: appIds,
            containerIds: containerIds,
            errorClasses: errorClasses,
            grouping: grouping,
            attestedOnly: attestedOnly ? true : nil
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode(options)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// Takes the options from their stored JSON; missing fields keep their defaults.
    public mutating func apply(optionsJSON: String) {
        guard let options = try? JSONDecoder().decode(Options.self, from: Data(optionsJSON.utf8)) else { return }
        format = options.format ?? .standardWebhooks
        routingKey = options.routingKey
        appIds = options.appIds ?? []
        containerIds = options.containerIds ?? []
        errorClasses = options.errorClasses ?? []
        grouping = options.grouping
        attestedOnly = options.attestedOnly ?? false
    }
}

/// A message waiting in the outbox, or given up on.
public struct OutboxMessage: Sendable, Hashable {
    /// Pending or failed.
    public enum State: String, Sendable {
        case pending
        case failed
    }

    /// The `webhook-id`, stable across retries.
    public var id: String
    /// The subscription.
    public var webhookId: String
    /// Messages on one line are delivered one at a time, in order.
    public var orderingKey: OutboxLine
    /// The JSON body.
    public var payload: String
    /// When it was written.
    public var createdAt: Timestamp
    /// Attempts made so far.
    public var attempts: Int
    /// When the next attempt is due.
    public var nextAttemptAt: Timestamp
    /// Pending or failed.
    public var state: State

    /// Creates a message.
    public init(
        id: String,
        webhookId: String,
        orderingKey: OutboxLine,
        payload: String,
        createdAt: Timestamp,
        attempts: Int = 0,
        nextAttemptAt: Timestamp,
        state: State = .pending
    ) {
        self.id = id
        self.webhookId = webhookId
        self.orderingKey = orderingKey
        self.payload = payload
        self.createdAt = createdAt
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.state = state
    }
}

/// One delivery attempt, as the delivery log shows it.
public struct DeliveryAttempt: Sendable, Hashable {
    /// How the attempt ended.
    public enum Outcome: String, Sendable {
        /// 2xx: the message is delivered and left the outbox.
        case delivered
        /// Failed; another attempt is scheduled.
        case retrying
        /// Failed, and the schedule is exhausted (or the subscription is gone): kept as failed.
        case failed
        /// The receiver answered 410: the subscription is disabled.
        case disabled
    }

    /// Position in the log (the cursor).
    public var seq: Int64
    /// The subscription.
    public var webhookId: String
    /// The message's `webhook-id`.
    public var messageId: String
    /// 1 for the first attempt.
    public var attempt: Int
    /// When it was made.
    public var attemptedAt: Timestamp
    /// The receiver's status code, if it answered.
    public var statusCode: Int?
    /// What went wrong, if anything.
    public var error: String?
    /// When the next attempt is due, if one is scheduled.
    public var nextRetryAt: Timestamp?
    /// How it ended.
    public var outcome: Outcome

    /// Creates an attempt.
    public init(
        seq: Int64 = 0,
        webhookId: String,
        messageId: String,
        attempt: Int,
        attemptedAt: Timestamp,
        statusCode: Int?,
        error: String?,
        nextRetryAt: Timestamp?,
        outcome: Outcome
    ) {
        self.seq = seq
        self.webhookId = webhookId
        self.messageId = messageId
        self.attempt = attempt
        self.attemptedAt = attemptedAt
        self.statusCode = statusCode
        self.error = error
        self.nextRetryAt = nextRetryAt
        self.outcome = outcome
    }
}

/// The store's webhook side: subscriptions, the outbox and the delivery log.
public protocol WebhookStore: Sendable {
    /// Every subscription, disabled ones included.
    func webhooks() async throws -> [WebhookSubscription]
    /// Inserts or replaces a subscription.
    func saveWebhook(_ webhook: WebhookSubscription) async throws
    /// Deletes a subscription, its outbox and its log. Returns whether it existed.
    func deleteWebhook(id: String) async throws -> Bool
    /// Pending messages due at `now` that are first in line for their (webhook, ordering key): an earlier
    /// message of the same key, pending or failed, holds later ones back.
    func dueMessages(now: Timestamp, limit: Int) async throws -> [OutboxMessage]
    /// The earliest `nextAttemptAt` of any pending message.
    func nextDueTime() async throws -> Timestamp?
    /// Records an attempt and its consequence on the message (and on the subscription for 410), atomically.
    func recordAttempt(_ attempt: DeliveryAttempt, disable reason: String?) async throws
    /// A page of a subscription's delivery log, newest first.
    func deliveries(webhookId: String, limit: Int, before cursor: Int64?) async throws -> (attempts: [DeliveryAttempt], nextCursor: Int64?)
    /// Makes a failed message pending again, due now, with a fresh schedule. Returns whether it was found.
    func resend(webhookId: String, messageId: String, now: Timestamp) async throws -> Bool
}

/// A line of a subscription's messages: messages on one line are delivered one at a time, in order, and a device
/// that leaves takes its lines' queued messages with it. Stored as `storageKey`, which never changes: replicas of
/// two releases share one outbox.
public struct OutboxLine: Hashable, Sendable {
    /// The stored form.
    public let storageKey: String

    /// A line read back from the store.
    public init(storageKey: String) { self.storageKey = storageKey }

    /// One device's, container's or release's alerts of one kind: the alert line's own key.
    public static func alert(_ line: AlertLine) -> OutboxLine { OutboxLine(storageKey: line.storageKey) }

    /// One incident's messages. The prefix keeps them apart from every alert line (whose keys start with the
    /// subject's letter and U+0001 too, but never `i`).
    public static func incident(_ key: IncidentKey) -> OutboxLine { OutboxLine(storageKey: "i\u{1}" + key.identity) }
}
