public import Logging
public import ServiceLifecycle
import SyncHealthCore
public import SyncHealthStore

/// When a silence ends, delivers the fires it was the last to hold (`SilenceCover`) of the alerts that still fire. An
/// alert that resolved meanwhile is not delivered, nor is its resolve. Incidents need no release: the incident book
/// tells what a silence held at its first step after the silence ends.
public struct SilenceRelease: Service {
    let engine: any EngineReads
    /// The silences released, the subscriptions told, and the sender woken.
    let delivery: Delivery
    /// Where the released fires' messages are queued.
    let store: any SyncStore
    let logger: Logger

    /// Releases `delivery`'s silences over `engine`'s alerts, queueing messages in `store`.
    public init(engine: any EngineReads, delivery: Delivery, store: any SyncStore, logger: Logger) {
        self.engine = engine
        self.delivery = delivery
        self.store = store
        self.logger = logger
    }

    /// Releases `delivery`'s silences over `engine`'s alerts, queueing messages in the engine's store.
    public init(engine: any EngineReads, delivery: Delivery, logger: Logger) {
        self.init(engine: engine, delivery: delivery, store: engine.syncStore, logger: logger)
    }

    public func run() async throws {
        let silences = delivery.silences
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                if engine.isReady {
                    do {
                        try await releaseEnded()
                    } catch {
                        logger.warning("Releasing the deliveries held by a silence failed", metadata: ["error": "\(error)"])
                    }
                }
                // Ends are checked at the next end, when a silence is deleted, and every minute (another replica may
                // have created one).
                let now = engine.now
                let next = [silences.nextEnd(), now + (engine.isReady ? .seconds(60) : .seconds(1))].compactMap { $0 }.filter { $0 > now }.min()
                await silences.ended.wait(until: next ?? now + .seconds(60), clock: engine.clock)
            }
        }
    }

    /// Releases every silence that has ended.
    func releaseEnded() async throws {
        let silences = delivery.silences
        let now = engine.now
        let ended = try await silences.endedUnreleased(now: now)
        guard !ended.isEmpty else { return }
        let firing = try await engine.firingAlerts()
        for silence in ended {
            var messages: [OutboxMessage] = []
            for (alert, context) in firing where silences.releases(silence, alert, info: context.info, now: now) {
                messages += OutboxBuilder.messages(
                    for: alert,
                    change: .fire,
                    line: Self.line(of: alert),
                    context: context,
                    subscribers: delivery.webhooks.routed(alert, context: context),
                    now: now,
                    publicURL: engine.configuration.publicURL
                )
            }
            if !messages.isEmpty {
                try await store.enqueue(messages)
                delivery.outbox.notify()
            }
            try await silences.markReleased(silence)
            logger.info("Silence ended", metadata: ["silence.id": "\(silence.id)", "messages.released": "\(messages.count)"])
        }
    }

    /// The line an alert's messages are delivered along.
    static func line(of alert: AlertRecord) -> AlertLine {
        if alert.kind == .releaseRegression, let app = alert.appId, let version = alert.appVersion {
            return .release(appId: app, version: version)
        }
        if let device = alert.deviceId, let app = alert.appId { return .device(DeviceKey(appId: app, deviceId: device), alert.kind) }
        return .container(alert.containerId ?? "")
    }
}
