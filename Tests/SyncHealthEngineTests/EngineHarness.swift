import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthStore
import SyncHealthTestSupport
import Testing

/// A `MonitorEngine` as the service runs it, in a `ServiceGroup` with graceful shutdown, on a manual clock and a
/// recording transport, without HTTP: the engine's behaviour is tested here, and the HTTP tests keep what is HTTP.
struct EngineHarness {
    let engine: any MonitorEngine
    let clock: ManualClock
    let store: any SyncStore
    let transport: RecordingTransport

    init(
        store: MonitorStore = .local(InMemoryStore()),
        clock: ManualClock = ManualClock(testStart),
        configuration: EngineConfiguration = EngineConfiguration(),
        webhooks: WebhookConfiguration = WebhookConfiguration()
    ) {
        let transport = RecordingTransport()
        var logger = Logger(label: "engine-test")
        logger.logLevel = .critical
        self.engine = store.makeEngine(clock: clock, configuration: configuration, webhooks: webhooks, transport: transport, logger: logger)
        self.clock = clock
        self.store = store.store
        self.transport = transport
    }

    /// Runs `body` once the engine is ready, then shuts it down gracefully: it commits what it accepted and closes
    /// the store, so that a test can open the same directory again.
    func run(_ body: @escaping @Sendable (EngineHarness) async throws -> Void) async throws {
        var logger = Logger(label: "engine-test")
        logger.logLevel = .critical
        let group = ServiceGroup(services: [engine], logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            do {
                try await until { engine.isReady }
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
        let asleep = clock.sleeperCount
        clock.advance(by: duration)
        try await within(.seconds(5)) { await clock.waitForSleepers(asleep) }
    }
}

struct TimedOut: Error {}

/// Runs `body`, or throws `TimedOut` after `limit`: a liveness bound that keeps a broken test from hanging, not a
/// wait for anything.
func within(_ limit: Duration, _ body: @escaping @Sendable () async throws -> Void) async throws {
    try await withThrowingTaskGroup(of: Bool.self) { group in
        group.addTask {
            try await body()
            return true
        }
        group.addTask {
            try await Task.sleep(for: limit)
            return false
        }
        let finished = try await group.next() ?? false
        group.cancelAll()
        if !finished { throw TimedOut() }
    }
}

struct NeverHeld: Error {}

/// Waits until `condition` holds, for effects of the engine's own task; gives up (throws) after five seconds, a
/// liveness bound that only keeps a broken test from hanging.
func until(_ condition: () async throws -> Bool) async throws {
    for _ in 0..<500 {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    throw NeverHeld()
}
