import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOFoundationEssentialsCompat
import Prometheus
import ServiceLifecycle
import SyncHealthAttest
import SyncHealthCore
import SyncHealthEngineTesting
import SyncHealthPostgres
import SyncHealthSQLite
import SyncHealthStore
import SyncHealthTestSupport
import SyncHealthWebhooks
import Synchronization
import Testing

@testable import SyncHealthEngine
@testable import SyncHealthServer

let ingestKey = "test-ingest"
let readKey = "test-read"
let adminKey = "test-admin"
let testKeys = KeyRing(ingest: [ingestKey], read: [readKey], admin: [adminKey])

/// Everything a test needs: the app, built by the application's own builder over a store of the test's, and the
/// clock that drives it.
struct TestService {
    let engine: any MonitorEngine
    /// The silences, subscriptions and outbox's sender built beside the engine.
    let delivery: Delivery
    let clock: ManualClock
    let store: any SyncStore
    let app: Application<RouterResponder<AppRequestContext>>

    init(
        store: MonitorStore = .local(InMemoryStore()),
        clock: ManualClock = ManualClock(testStart),
        configuration: EngineConfiguration = EngineConfiguration(),
        transport: any WebhookTransport = RecordingTransport(),
        webhooks: DeliveryConfiguration = DeliveryConfiguration(),
        realTime: Bool = false,
        limits: RateLimits = RateLimits(),
        keys: KeyRing = testKeys,
        appAttest: AppAttestPolicy = AppAttestPolicy(),
        appAttestVerifier: AppAttestVerifier? = nil,
        streamLife: Duration = .seconds(3600),
        keyLimit: Int = 1000
    ) {
        self.store = store.store
        self.clock = clock
        var service = ServiceConfiguration()
        service.engine = configuration
        service.webhooks = webhooks
        service.rateLimits = limits
        service.appAttest = appAttest
        service.streamMaximumLife = streamLife
        service.keyLimit = keyLimit
        // PostgreSQL's connection pool runs first and stops last, as in the service.
        let pool: (any Service)? = if case .shared(let shared) = store, let postgres = shared as? PostgresStore { postgres.service } else { nil }
        (app, engine, delivery) = SyncHealthApplication.assemble(
            store: store,
            storeService: pool,
            keys: keys,
            configuration: service,
            transport: transport,
            clock: realTime ? SystemClock() : clock,
            registry: PrometheusCollectorRegistry(),
            logger: testLogger(),
            appAttestVerifier: appAttestVerifier
        )
    }

    /// Runs `body` against the router (or, with `.live`, a real server on a loopback port) once the engine is ready.
    func test(_ framework: TestingSetup = .router, _ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        try await app.test(framework) { client in
            try await waitUntilReady(engine)
            try await body(client)
        }
    }
}

extension TestService {
    /// Deliveries counted after this are final for what was posted before it (`outboxDrained`).
    func drained() async throws {
        #expect(try await eventually { try await outboxDrained(store) }, "the outbox drains")
    }
}

struct NotReady: Error {}

func waitUntilReady(_ engine: any MonitorEngine) async throws {
    guard try await eventually({ engine.isReady }) else { throw NotReady() }
}

func headers(_ key: String?, _ extra: HTTPFields = [:]) -> HTTPFields {
    var fields = extra
    if let key { fields[.authorization] = "Bearer \(key)" }
    return fields
}

/// Decodes a JSON object body.
func json(_ response: TestResponse) throws -> [String: Any] {
    let object = try JSONSerialization.jsonObject(with: Data(buffer: response.body))
    guard let dict = object as? [String: Any] else { throw NotAnObject() }
    return dict
}

struct NotAnObject: Error {}

extension TestClientProtocol {
    @discardableResult
    func post(_ body: ByteBuffer, key: String? = ingestKey, headers extra: HTTPFields = [:]) async throws -> TestResponse {
        try await execute(uri: "/v1/events", method: .post, headers: headers(key, extra), body: body)
    }

    func get(_ uri: String, key: String? = readKey) async throws -> TestResponse {
        try await execute(uri: uri, method: .get, headers: headers(key))
    }
}

/// Firing alerts of a kind, through the API.
func firing(_ client: any TestClientProtocol, kind: AlertKind) async throws -> [[String: Any]] {
    try json(try await client.get("/v1/alerts?state=firing&kind=\(kind.rawValue)"))["data"] as? [[String: Any]] ?? []
}
