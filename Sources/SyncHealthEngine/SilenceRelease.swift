public import Logging
public import ServiceLifecycle
import SyncHealthCore
import SyncHealthStore

/// When a silence ends, delivers what it held that still holds: the alerts that fired while it was in force, match
/// it, and are not held by another silence still in force; and the open incidents whose first message it held, told
/// now as opened to their incident subscribers (Slack, PagerDuty). An alert or incident that resolved meanwhile is
/// not delivered.
public struct SilenceRelease: Service {
    let engine: any MonitorEngine
    let logger: Logger

    /// Releases for `engine`'s silences.
    public init(engine: any MonitorEngine, logger: Logger) {
        self.engine = engine
        self.logger = logger
    }

    public func run() async throws {
        let silences = engine.webhooks.silences
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
        let silences = engine.webhooks.silences
        let now = engine.now
        let ended = try await silences.endedUnreleased(now: now)
        guard !ended.isEmpty else { return }
        let firing = try await AlertmanagerRefresh.firingAlerts(of: engine)
        let open = try await engine.webhooks.store.openIncidents()
        for silence in ended {
            var messages: [OutboxMessage] = []
            for (alert, context) in firing
            where silence.isActive(at: alert.startsAt) && silence.matchers.matches(alert, info: context.info)
                && silences.silencedBy(alert, info: context.info, now: now).isEmpty
            {
                let line: AlertLine =
                    alert.deviceId.flatMap { id in alert.appId.map { .device(DeviceKey(appId: $0, deviceId: id), alert.kind) } }
                    ?? .container(alert.containerId ?? "")
                let subscribers = engine.webhooks.subscribers(for: alert, context: context, now: now)
                messages += OutboxBuilder.messages(
                    for: alert,
                    change: .fire,
                    line: line,
                    context: context,
                    subscribers: subscribers,
                    now: now,
                    publicURL: engine.configuration.publicURL
                )
            }
            messages += heldIncidentMessages(open, by: silence, now: now)
            if !messages.isEmpty {
                try await engine.webhooks.store.enqueue(messages)
                engine.webhooks.notify()
            }
            try await silences.markReleased(silence)
            logger.info("Silence ended", metadata: ["silence.id": "\(silence.id)", "messages.released": "\(messages.count)"])
        }
    }

    /// The messages of the open incidents whose first message `silence` held: it was in force when the incident was
    /// first told (its group wait after it opened) and until its last message, and it matches the incident. Told as
    /// opened, with what the incident holds now, to the subscribers no other silence holds it from.
    func heldIncidentMessages(_ open: [IncidentRecord], by silence: Silence, now: Timestamp) -> [OutboxMessage] {
        let groupWait = engine.configuration.incidents.groupWait
        var messages: [OutboxMessage] = []
        for incident in open where incident.messages > 0 {
            let firstTold = incident.openedAt + groupWait
            guard silence.isActive(at: firstTold), (incident.notifiedAt ?? firstTold) < silence.endsAt else { continue }
            let target = IncidentWatch.target(of: incident)
            guard silence.matchers.matches(target.alert, info: target.info) else { continue }
            messages += IncidentMessage.messages(
                incident,
                notice: .opened,
                subscribers: engine.webhooks.incidentSubscribers(for: target.alert, info: target.info, errorClass: target.errorClass, now: now),
                now: now,
                publicURL: engine.configuration.publicURL
            )
        }
        return messages
    }
}
