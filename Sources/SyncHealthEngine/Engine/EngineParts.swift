import Logging

/// What both pipelines are made of, built the same way for either: the clock, the tunables, the delivery parts
/// (silences, subscriptions, the outbox's sender), the log, the metrics, the request queue and the live feed. `LocalMonitor` and `SharedMonitor` each hold one and
/// add only what differs (their store and their cache).
struct EngineParts: Sendable {
    /// The service's clock.
    let clock: any ServiceClock
    /// Tunables.
    let configuration: EngineConfiguration
    /// Silences, subscriptions and the outbox's sender: what plans read (`Routing`) and what a commit wakes.
    let delivery: Delivery
    let logger: Logger
    let metrics: EngineMetrics
    /// Requests waiting for the next group.
    let queue: IngestQueue
    /// Alert transitions and fleet-summary changes, for live views.
    let feed = LiveFeed()

    init(clock: any ServiceClock, configuration: EngineConfiguration, delivery: Delivery, logger: Logger) {
        self.clock = clock
        self.configuration = configuration
        self.delivery = delivery
        self.logger = logger
        let metrics = EngineMetrics()
        self.metrics = metrics
        self.queue = IngestQueue(capacity: configuration.maxQueuedRequests, metrics: metrics)
    }
}
