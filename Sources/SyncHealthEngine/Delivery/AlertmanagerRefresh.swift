public import Logging
public import ServiceLifecycle
import SyncHealthCore
import SyncHealthStore
import SyncHealthWebhooks

/// Posts every firing alert to each `alertmanager` subscription again, once a minute and once at start.
///
/// Alertmanager resolves an alert whose `endsAt` has passed; each post holds it for `AlertmanagerFormat.hold`
/// more, so it stays active while it fires here, across Alertmanager's `resolve_timeout` and across a restart of
/// this service. The fire and the resolve themselves go through the outbox, in order, with retries; a refresh
/// that fails is only logged, and the next one makes up for it.
public struct AlertmanagerRefresh: Service {
    let engine: any EngineReads
    /// The subscriptions posted to, the silences that leave an alert out, and the sender that posts.
    let delivery: Delivery
    let interval: Duration
    let logger: Logger

    /// Refreshes every `interval` (60 s by default).
    public init(engine: any EngineReads, delivery: Delivery, interval: Duration = .seconds(60), logger: Logger) {
        self.engine = engine
        self.delivery = delivery
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        let wake = WakeSignal()
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                if engine.isReady { await refresh() }
                await wake.wait(until: engine.now + (engine.isReady ? interval : .seconds(1)), clock: engine.clock)
            }
        }
    }

    /// One refresh of every `alertmanager` subscription.
    func refresh() async {
        let targets = (try? await delivery.webhooks.list())?.filter { $0.format == .alertmanager && $0.disabledReason == nil } ?? []
        guard !targets.isEmpty else { return }
        let firing: [(AlertRecord, AlertContext)]
        do {
            try await delivery.silences.refreshIfShared()
            firing = try await engine.firingAlerts()
        } catch {
            logger.warning("Reading the firing alerts for Alertmanager failed", metadata: ["error": "\(error)"])
            return
        }
        let now = engine.now
        for subscription in targets {
            // A silenced alert is not refreshed: Alertmanager lets it lapse, as it would not hear of it at all.
            let alerts = firing.filter {
                subscription.wants($0.0, errorClass: $0.1.errorClass, attested: $0.1.attested)
                    && delivery.silences.silencedBy($0.0, info: $0.1.info, now: now).isEmpty
            }.map { AlertmanagerFormat.alert($0.0, context: $0.1, now: now) }
            guard !alerts.isEmpty else { continue }
            for chunk in stride(from: 0, to: alerts.count, by: 500).map({ Array(alerts[$0..<min($0 + 500, alerts.count)]) }) {
                guard let body = AlertmanagerFormat.encode(chunk) else { continue }
                let response = await delivery.outbox.send(
                    url: AlertmanagerFormat.deliveryURL(subscription.url),
                    headers: [(name: "content-type", value: "application/json")],
                    body: Array(body.utf8)
                )
                if case .status(200...299, _) = response { continue }
                logger.warning("Refreshing alerts in Alertmanager failed", metadata: ["webhook.id": "\(subscription.id)", "response": "\(response)"])
            }
        }
    }
}
