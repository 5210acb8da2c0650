import Foundation
public import Logging
import Metrics
public import ServiceLifecycle
import SyncHealthCore
public import SyncHealthStore
public import SyncHealthWebhooks
import Synchronization

/// Webhook settings.
public struct WebhookConfiguration: Sendable {
    /// Delay before each attempt: the first is immediate. When it is exhausted, the message is kept as failed.
    public var retrySchedule: [Duration] = [
        .zero, .seconds(5), .seconds(300), .seconds(1800), .seconds(7200),
        .seconds(18_000), .seconds(36_000), .seconds(36_000),
    ]
    /// Random spread applied to each retry delay (0.1 = ±10%).
    public var jitter: Double = 0.1
    /// Whether receivers may be on loopback or private addresses.
    public var allowPrivate = false
    /// Deliveries in flight at once.
    public var concurrency = 8
    /// Longest `Retry-After` honoured.
    public var maxRetryAfter: Duration = .seconds(86_400)

    /// The defaults.
    public init() {}
}

/// Why a webhook request was refused.
public enum WebhookError: Error, Sendable {
    case invalidURL(String)
    case invalidKinds(String)
    case invalidField(pointer: String, detail: String)
    case notFound
}

/// What `POST /v1/webhooks` asks for, before it is checked.
public struct WebhookRequestFields: Sendable {
    public var url: String
    public var kinds: [String] = []
    public var description: String?
    public var format: String?
    public var routingKey: String?
    public var appIds: [String] = []
    public var containerIds: [String] = []
    public var errorClasses: [String] = []
    public var grouping: String?
    public var attestedOnly = false

    /// The fields of a request.
    public init(
        url: String,
        kinds: [String] = [],
        description: String? = nil,
        format: String? = nil,
        routingKey: String? = nil,
        appIds: [String] = [],
        containerIds: [String] = [],
        errorClasses: [String] = [],
        grouping: String? = nil,
        attestedOnly: Bool = false
    ) {
        self.url = url
        self.kinds = kinds
        self.description = description
        self.format = format
        self.routingKey = routingKey
        self.appIds = appIds
        self.containerIds = containerIds
        self.errorClasses = errorClasses
        self.grouping = grouping
        self.attestedOnly = attestedOnly
    }
}

/// The subscriptions and the silences: which subscriptions hear of an alert or an incident, and their management.
///
/// The engine writes outbox rows in the same transaction as the alert transitions that cause them, for the
/// subscriptions this registry names; `OutboxSender` sends them, and waits on `outboxChanged` for new ones.
public final class WebhookCenter: Sendable {
    let store: any SyncStore
    let clock: any ServiceClock
    let configuration: WebhookConfiguration
    let logger: Logger
    /// Whether other processes may change the subscriptions (a shared store): then they are read again before use.
    let reloadsBeforeUse: Bool
    let subscriptions = Mutex<[String: WebhookSubscription]>([:])
    /// The silences, which hold deliveries back.
    public let silences: SilenceCenter
    /// Signalled when messages may be waiting (a commit wrote some, one is sent again): the sender waits on it.
    let outboxChanged = WakeSignal()
    /// Signalled by the first `load()`.
    let loadedSignal = WakeSignal()
    let loaded = Atomic<Bool>(false)

    /// Creates the registry. `reloadsBeforeUse` when other replicas share the store and may change the subscriptions.
    public init(
        store: any SyncStore,
        clock: any ServiceClock,
        configuration: WebhookConfiguration,
        reloadsBeforeUse: Bool = false,
        logger: Logger
    ) {
        self.store = store
        self.reloadsBeforeUse = reloadsBeforeUse
        self.silences = SilenceCenter(store: store, clock: clock, reloadsBeforeUse: reloadsBeforeUse)
        self.clock = clock
        self.configuration = configuration
        self.logger = logger
    }

    /// Loads the subscriptions. Called by the engine before it serves.
    func load() async throws {
        try await silences.load()
        replaceSubscriptions(try await store.webhooks())
    }

    /// Takes `all` as the subscriptions, read from the store by the caller.
    func replaceSubscriptions(_ all: [WebhookSubscription]) {
        subscriptions.withLock { s in s = Dictionary(uniqueKeysWithValues: all.map { ($0.id, $0) }) }
        if !loaded.exchange(true, ordering: .acquiringAndReleasing) { loadedSignal.signal() }
    }

    /// Active subscriptions that want `alert`, in id order; none while a silence holds it.
    func subscribers(for alert: AlertRecord, context: AlertContext) -> [WebhookSubscription] {
        subscribers(for: alert, context: context, now: clock.now)
    }

    /// The subscriptions that hear of an alert's transition. Those that group by device hear of every one they want.
    /// Those that group by incident hear of the incidents instead: of a container's `fleetDegraded` only if they
    /// name that kind, since its causes reach them as incidents. A `releaseRegression` has no incident: every
    /// subscription that wants it hears of it.
    func subscribers(for alert: AlertRecord, context: AlertContext, now: Timestamp) -> [WebhookSubscription] {
        guard !silences.holds(alert, info: context.info, now: now) else { return [] }
        return routed(alert, context: context)
    }

    /// The subscriptions that want `alert`, silences aside: those a silence's release tells of it.
    func routed(_ alert: AlertRecord, context: AlertContext) -> [WebhookSubscription] {
        let perDevice = alert.deviceId != nil
        return subscriptions.withLock {
            $0.values.filter { subscription in
                guard subscription.wants(alert, errorClass: context.errorClass, attested: context.attested) else { return false }
                guard subscription.effectiveGrouping == .incident, alert.kind != .releaseRegression else { return true }
                return !perDevice && subscription.kinds.contains(alert.kind)
            }
            .sorted { $0.id < $1.id }
        }
    }

    /// The subscriptions that hear of an incident: those that group by incident and want its alerts (`alert` is a
    /// representative one: the incident's kind, app and container), and ask for its population (`attestedOnly`).
    /// Silences are the incident book's to apply: it does not tell what a silence holds, and tells it at its first
    /// step after the silence ends.
    func incidentSubscribers(for alert: AlertRecord, errorClass: ErrorClass?, attestedOnly: Bool) -> [WebhookSubscription] {
        subscriptions.withLock {
            $0.values.filter {
                $0.effectiveGrouping == .incident && $0.attestedOnly == attestedOnly && $0.wants(alert, errorClass: errorClass, attested: true)
            }
            .sorted { $0.id < $1.id }
        }
    }

    /// Tells the sender that new messages are waiting.
    func notify() { outboxChanged.signal() }

    /// The subscription `id`, as last loaded.
    func subscription(_ id: String) -> WebhookSubscription? {
        subscriptions.withLock { $0[id] }
    }

    /// Marks a subscription disabled in memory, once the store has recorded it.
    func disabled(_ id: String, reason: String) {
        subscriptions.withLock { $0[id]?.disabledReason = reason }
    }

    // MARK: Management

    /// Creates a subscription after checking its fields, and its URL (scheme, and the SSRF guard).
    public func create(_ fields: WebhookRequestFields) async throws -> WebhookSubscription {
        var parsedKinds: [AlertKind] = []
        for name in fields.kinds {
            guard let kind = AlertKind(rawValue: name) else { throw WebhookError.invalidKinds(name) }
            if !parsedKinds.contains(kind) { parsedKinds.append(kind) }
        }
        let format =
            try fields.format.map { name in
                guard let format = WebhookFormat(rawValue: name) else {
                    throw WebhookError.invalidField(
                        pointer: "/format",
                        detail: "\(name) is not a format; use " + WebhookFormat.allCases.map(\.rawValue).joined(separator: ", ")
                    )
                }
                return format
            } ?? .standardWebhooks
        let routingKey = fields.routingKey.flatMap { $0.isEmpty ? nil : $0 }
        if let routingKey, routingKey.count > 256 {
            throw WebhookError.invalidField(pointer: "/routingKey", detail: "routingKey is longer than 256 characters")
        }
        var errorClasses: [ErrorClass] = []
        for name in fields.errorClasses {
            guard let errorClass = ErrorClass(rawValue: name) else {
                throw WebhookError.invalidField(
                    pointer: "/errorClasses",
                    detail: "\(name) is not an error class; use " + ErrorClass.allCases.map(\.rawValue).joined(separator: ", ")
                )
            }
            if !errorClasses.contains(errorClass) { errorClasses.append(errorClass) }
        }
        let grouping = try fields.grouping.map { name in
            guard let grouping = WebhookGrouping(rawValue: name) else {
                throw WebhookError.invalidField(pointer: "/grouping", detail: "\(name) is not a grouping; use incident or device")
            }
            return grouping
        }
        try format.alertFormat.validate(routingKey: routingKey, grouping: grouping)
        if fields.attestedOnly, !parsedKinds.isEmpty, !parsedKinds.contains(where: AlertKind.deviceKinds.contains) {
            throw WebhookError.invalidField(
                pointer: "/attestedOnly",
                detail: "fleetDegraded and releaseRegression count every device's reports: an attestedOnly subscription needs a device kind"
            )
        }
        for (pointer, list) in [("/appIds", fields.appIds), ("/containerIds", fields.containerIds)]
        where list.contains(where: { $0.isEmpty || $0.count > 256 }) {
            throw WebhookError.invalidField(pointer: pointer, detail: "each entry must be 1-256 characters")
        }
        let guardian = AddressGuard(allowPrivate: configuration.allowPrivate)
        do {
            _ = try guardian.check(format.alertFormat.deliveryURL(fields.url))
        } catch .unresolvable {
            // Not proof of anything: DNS may be down, or the name not live yet. Every delivery checks again.
        } catch {
            throw WebhookError.invalidURL(error.description)
        }
        let subscription = WebhookSubscription(
            id: "wh_" + RandomToken.make().prefix(22),
            url: fields.url,
            kinds: parsedKinds,
            description: fields.description,
            secret: WebhookSigner.makeSecret(),
            createdAt: clock.now,
            format: format,
            routingKey: routingKey,
            appIds: Array(Set(fields.appIds)).sorted(),
            containerIds: Array(Set(fields.containerIds)).sorted(),
            errorClasses: errorClasses,
            grouping: grouping,
            attestedOnly: fields.attestedOnly
        )
        try await management { try await store.saveWebhook(subscription) }
        subscriptions.withLock { $0[subscription.id] = subscription }
        return subscription
    }

    /// Every subscription.
    public func list() async throws -> [WebhookSubscription] {
        try await management { try await refreshIfShared() }
        return subscriptions.withLock { $0.values.sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) } }
    }

    /// One subscription.
    public func get(_ id: String) async throws -> WebhookSubscription? {
        try await management { try await refreshIfShared() }
        return subscriptions.withLock { $0[id] }
    }

    /// Runs a management call's store access: `starting` until the engine has loaded the store (a shared
    /// store is migrated then), and a store failure becomes `storeUnavailable` (503), logged here.
    func management<T>(_ body: () async throws -> T) async throws -> T {
        guard loaded.load(ordering: .acquiring) else { throw EngineError.starting }
        do {
            return try await body()
        } catch {
            logger.error("Webhook store access failed", metadata: ["error": "\(String(reflecting: error))"])
            throw EngineError.storeUnavailable
        }
    }

    /// With a store shared by several replicas, another replica may have changed the subscriptions: the
    /// cache is reloaded before each use (the table is small).
    func refreshIfShared() async throws {
        if reloadsBeforeUse { try await load() }
    }

    /// Deletes a subscription with its pending messages and log.
    public func delete(_ id: String) async throws -> Bool {
        let existed = try await management { try await store.deleteWebhook(id: id) }
        subscriptions.withLock { _ = $0.removeValue(forKey: id) }
        return existed
    }

    /// A page of the delivery log.
    public func deliveries(_ id: String, limit: Int, before cursor: Int64?) async throws -> (attempts: [DeliveryAttempt], nextCursor: Int64?) {
        guard try await get(id) != nil else { throw WebhookError.notFound }
        return try await management { try await store.deliveries(webhookId: id, limit: limit, before: cursor) }
    }

    /// Sends a failed message again, with a fresh schedule.
    public func resend(_ id: String, messageId: String) async throws -> Bool {
        guard try await get(id) != nil else { throw WebhookError.notFound }
        let found = try await management { try await store.resend(webhookId: id, messageId: messageId, now: clock.now) }
        if found { notify() }
        return found
    }
}
