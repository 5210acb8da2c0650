public import Logging
public import ServiceLifecycle

extension MonitorStore {
    /// The services that run an engine over this store, in start order (shutdown runs in reverse): the engine, the
    /// outbox's sender, and the watches beside it (Alertmanager's refresh, silences' release, incidents, release
    /// regressions, fleet history, the live feed's tick) and, on a shared store, the follower that brings other
    /// replicas' transitions to this one's live feed. The service runs these; so do the engine's tests.
    public func services(of engine: any MonitorEngine, delivery: Delivery, logger: Logger) -> [any Service] {
        var services: [any Service] = [
            engine, delivery.outbox, AlertmanagerRefresh(engine: engine, delivery: delivery, logger: logger),
            SilenceRelease(engine: engine, delivery: delivery, store: store, logger: logger),
            IncidentWatch(engine: engine, delivery: delivery, store: store, logger: logger),
            RegressionWatch(engine: engine, delivery: delivery, store: store, logger: logger),
            HistoryRecorder(engine: engine, store: store, logger: logger),
            LiveFeedTicker(engine: engine, logger: logger),
        ]
        if case .shared(let shared) = self { services.append(TransitionFollower(engine: engine, store: shared, logger: logger)) }
        return services
    }
}
