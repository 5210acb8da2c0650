import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthPostgres
import SyncHealthStore
import SyncHealthTestSupport
import Testing

/// A `MonitorEngine` as the service runs it, with the same services beside it (`MonitorStore.services(of:delivery:logger:)`),
/// in a `ServiceGroup` with graceful shutdown, on a manual clock and a recording transport, without HTTP: the
/// engine's behaviour is tested here, and the HTTP tests keep what is HTTP.
struct EngineHarness {
    let engine: any MonitorEngine
    /// The silences, subscriptions and outbox's sender built beside the engine.
    let delivery: Delivery
    let clock: ManualClock
    let store: any SyncStore
    let transport: RecordingTransport
    let services: [any Service]

    init(
        store: MonitorStore = .local(InMemoryStore()),
        clock: ManualClock = ManualClock(testStart),
        configuration: EngineConfiguration = EngineConfiguration(),
        webhooks: DeliveryConfiguration = DeliveryConfiguration(),
        transport: RecordingTransport = RecordingTransport(),
        drivenDecisions: Bool = false
    ) {
        var logger = Logger(label: "engine-test")
        logger.logLevel = .critical
        let delivery = store.makeDelivery(clock: clock, configuration: webhooks, transport: transport, logger: logger)
        let engine = store.makeEngine(clock: clock, configuration: configuration, delivery: delivery, logger: logger)
        self.engine = engine
        self.delivery = delivery
        // PostgreSQL's connection pool runs as a service before the engine, as in the service.
        let pool: [any Service] = if case .shared(let shared) = store, let postgres = shared as? PostgresStore { [postgres.service] } else { [] }
        // A test that drives the decisions made on a schedule (incidents, silences' releases, Alertmanager's refresh,
        // releases) runs them itself, in an order it knows; the engine and its deliveries run as in the service.
        let decisions: (any Service) -> Bool = { $0 is IncidentWatch || $0 is SilenceRelease || $0 is AlertmanagerRefresh || $0 is RegressionWatch }
        self.services = pool + store.services(of: engine, delivery: delivery, logger: logger).filter { !drivenDecisions || !decisions($0) }
        self.clock = clock
        self.store = store.store
        self.transport = transport
    }

    /// Runs `body` once the engine is ready, then shuts it down gracefully: it commits what it accepted and closes
    /// the store, so that a test can open the same directory again.
    func run(_ body: @escaping @Sendable (EngineHarness) async throws -> Void) async throws {
        var logger = Logger(label: "engine-test")
        logger.logLevel = .critical
        var configuration = ServiceGroupConfiguration(services: services.map { .init(service: $0) }, logger: logger)
        // A test that failed midway (a service still waiting on the manual clock) ends instead of hanging.
        configuration.maximumGracefulShutdownDuration = .seconds(30)
        let group = ServiceGroup(configuration: configuration)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            do {
                guard try await eventually({ engine.isReady }) else { throw TimedOut() }
                try await body(self)
            } catch {
                await group.triggerGracefulShutdown()
                throw error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }

    /// Ingests a request body as `POST /v1/events` would, after its decoding.
    @discardableResult
    func post(_ body: ByteBuffer) async throws -> IngestReceipt {
        try await engine.ingest(try EventBatch.decode(json: Data(body.readableBytesView)))
    }

    /// The firing alerts of `kind`.
    func firing(_ kind: AlertKind) async throws -> [AlertRecord] {
        try await engine.alerts(AlertQuery(state: .firing, kind: kind)).alerts
    }

    /// Moves the clock on, and waits until the engine's loops it woke are asleep again: whatever came due is served.
    func advance(by duration: Duration) async throws {
        try await clock.advanceAndSettle(by: duration)
    }
}
