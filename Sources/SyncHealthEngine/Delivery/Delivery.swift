public import Logging
import SyncHealthCore
import SyncHealthStore
public import SyncHealthWebhooks

/// What tells ops, built side by side by the composition root (`MonitorStore.makeDelivery`): the silences, the
/// subscriptions, and the outbox's sender. The engine, the watches beside it and the routes each take the parts
/// they use; none of the three owns another.
public struct Delivery: Sendable {
    /// The silences, which hold messages back.
    public let silences: SilenceCenter
    /// The subscriptions: who hears of what, and their management.
    public let webhooks: WebhookCenter
    /// The outbox's sender.
    public let outbox: OutboxSender

    /// Creates the parts from those already built.
    public init(silences: SilenceCenter, webhooks: WebhookCenter, outbox: OutboxSender) {
        self.silences = silences
        self.webhooks = webhooks
        self.outbox = outbox
    }

    /// The subscriptions and silences as they stand, for planning at `now` (see `Routing`).
    func routing(now: Timestamp) -> Routing {
        Routing(subscriptions: webhooks.current, silences: silences.current, now: now)
    }

    /// Loads the silences and the subscriptions: the engine does before it serves.
    func load() async throws {
        try await silences.load()
        try await webhooks.load()
    }
}

extension MonitorStore {
    /// Builds the silences, the subscriptions and the outbox's sender over this store. On a shared store another
    /// replica may change the silences and the subscriptions: they are read again before each use.
    public func makeDelivery(
        clock: any ServiceClock,
        configuration: DeliveryConfiguration,
        transport: any WebhookTransport,
        logger: Logger
    ) -> Delivery {
        let silences = SilenceCenter(store: store, clock: clock, reloadsBeforeUse: isShared)
        let webhooks = WebhookCenter(
            store: store,
            clock: clock,
            allowPrivate: configuration.allowPrivate,
            reloadsBeforeUse: isShared,
            logger: logger
        )
        let outbox = OutboxSender(
            webhooks: webhooks,
            store: store,
            transport: transport,
            clock: clock,
            configuration: configuration,
            logger: logger
        )
        return Delivery(silences: silences, webhooks: webhooks, outbox: outbox)
    }
}
