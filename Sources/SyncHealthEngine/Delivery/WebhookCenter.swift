import Foundation
public import Logging
import Metrics
import ServiceLifecycle
import SyncHealthCore
public import SyncHealthStore
import SyncHealthWebhooks
import Synchronization

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

/// The subscriptions: which of them hear of an alert or an incident, and their management.
///
/// The engine writes outbox rows in the same transaction as the alert transitions that cause them, for the
/// subscriptions this registry names (silences aside: `SilenceCenter`, joined to this in `Routing`); `OutboxSender`
/// sends them.
public final class WebhookCenter: Sendable {
    let store: any SyncStore
    let clock: any ServiceClock
    /// Whether a subscription's receiver may be on loopback or a private address (`DeliveryConfiguration`).
    let allowPrivate: Bool
    let logger: Logger
    /// Whether other processes may change the subscriptions (a shared store): then they are read again before use.
    let reloadsBeforeUse: Bool
    let subscriptions = Mutex<[String: WebhookSubscription]>([:])
    /// Signalled by the first `load()`.
    let loadedSignal = WakeSignal()
    let loaded = Atomic<Bool>(false)

    /// Creates the registry. `reloadsBeforeUse` when other replicas share the store and may change the subscriptions.
    public init(
        store: any SyncStore,
        clock: any ServiceClock,
        allowPrivate: Bool,
        reloadsBeforeUse: Bool = false,
        logger: Logger
    ) {
        self.store = store
        self.reloadsBeforeUse = reloadsBeforeUse
        self.clock = clock
        self.allowPrivate = allowPrivate
        self.logger = logger
    }

    /// Loads the subscriptions. Called by the engine before it serves.
    func load() async throws {
        replaceSubscriptions(try await store.webhooks())
    }

    /// Takes `all` as the subscriptions, read from the store by the caller.
    func replaceSubscriptions(_ all: [WebhookSubscription]) {
        subscriptions.withLock { s in s = Dictionary(uniqueKeysWithValues: all.map { ($0.id, $0) }) }
        if !loaded.exchange(true, ordering: .acquiringAndReleasing) { loadedSignal.signal() }
    }

    /// Every subscription, as last loaded (copy-on-write: no copy is made unless it changes).
    var current: [String: WebhookSubscription] { subscriptions.withLock { $0 } }

    /// The subscriptions that want `alert`, silences aside: those a silence's release tells of it.
    func routed(_ alert: AlertRecord, context: AlertContext) -> [WebhookSubscription] {
        Self.routed(alert, context: context, in: current)
    }

    /// The subscriptions among `subscriptions` that hear of an alert's transition, in id order, silences aside.
    /// Those that group by device hear of every one they want. Those that group by incident hear of the incidents
    /// instead: of a container's `fleetDegraded` only if they name that kind, since its causes reach them as
    /// incidents. A `releaseRegression` has no incident: every subscription that wants it hears of it.
    static func routed(
        _ alert: AlertRecord,
        context: AlertContext,
        in subscriptions: [String: WebhookSubscription]
    ) -> [WebhookSubscription] {
        let perDevice = alert.deviceId != nil
        return subscriptions.values.filter { subscription in
            guard subscription.wants(alert, errorClass: context.errorClass, attested: context.attested) else { return false }
            guard subscription.effectiveGrouping == .incident, alert.kind != .releaseRegression else { return true }
            return !perDevice && subscription.kinds.contains(alert.kind)
        }
        .sorted { $0.id < $1.id }
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
        let guardian = AddressGuard(allowPrivate: allowPrivate)
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

    /// Schedules a failed message again, with a fresh schedule; the caller wakes the sender
    /// (`OutboxSender.notify`) when it was found.
    public func resend(_ id: String, messageId: String) async throws -> Bool {
        guard try await get(id) != nil else { throw WebhookError.notFound }
        return try await management { try await store.resend(webhookId: id, messageId: messageId, now: clock.now) }
    }
}
