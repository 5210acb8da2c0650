import Foundation
public import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
public import Logging
import NIOCore
public import Prometheus
public import ServiceLifecycle
public import SyncHealthAttest
import SyncHealthBuildInfo
import SyncHealthCore
public import SyncHealthEngine
import SyncHealthPostgres
import SyncHealthSQLite
import SyncHealthStore
public import SyncHealthWebhooks

/// The composition root: builds the store, the engine and the HTTP application from a configuration.
public enum SyncHealthApplication {
    /// Builds the router over an engine and the delivery parts beside it.
    static func makeRouter<Engine: MonitorEngine>(
        engine: Engine,
        delivery: Delivery,
        keys: KeyDirectory,
        registry: PrometheusCollectorRegistry,
        limits: RateLimits = RateLimits(),
        backup: (any StoreBackup)? = nil,
        attestation: AppAttestGate? = nil,
        streamLife: Duration = StreamRoutes<Engine>.defaultMaximumLife
    ) -> Router<AppRequestContext> {
        let routes = apiRoutes(
            engine: engine,
            delivery: delivery,
            keys: keys,
            registry: registry,
            limits: limits,
            backup: backup,
            attestation: attestation,
            streamLife: streamLife
        )
        let router = Router(context: AppRequestContext.self)
        router.middlewares.add(RequestMetricsMiddleware())
        router.middlewares.add(ProblemMiddleware(paths: KnownPaths(routes)))
        router.middlewares.add(AuthMiddleware(keys: keys, keyLimiter: RateLimiter(limit: limits.perKey), clock: engine.clock))
        for route in routes {
            router.on(RouterPath(route.path), method: route.method, use: route.handler)
        }
        return router
    }

    /// Every endpoint of the API, once: the router and the `405 Allow` answers both come from this table.
    static func apiRoutes<Engine: MonitorEngine>(
        engine: Engine,
        delivery: Delivery,
        keys: KeyDirectory,
        registry: PrometheusCollectorRegistry,
        limits: RateLimits,
        backup: (any StoreBackup)? = nil,
        attestation: AppAttestGate? = nil,
        streamLife: Duration = StreamRoutes<Engine>.defaultMaximumLife
    ) -> [APIRoute] {
        let health = ServiceRoutes(engine: engine, keys: keys, registry: registry, metricsNeedKey: keys.configured.protectsMetrics)
        let events = EventsRoutes(engine: engine, deviceLimiter: RateLimiter(limit: limits.perDevice), attestation: attestation)
        // Who changed what: keys, subscriptions, silences, erasures, backups (`GET /v1/audit`).
        let audit = AuditLog(store: keys.store, clock: engine.clock)
        let devices = DeviceRoutes(engine: engine, audit: audit, attestation: attestation)
        let fleet = FleetRoutes(engine: engine, silences: delivery.silences, attestation: attestation)
        let attest = AttestRoutes(
            gate: attestation,
            keyLimiter: RateLimiter(limit: limits.attestPerKey),
            deviceLimiter: RateLimiter(limit: limits.attestPerDevice),
            clock: engine.clock,
            audit: audit
        )
        let hooks = WebhookRoutes(webhooks: delivery.webhooks, outbox: delivery.outbox, audit: audit)
        let silences = SilenceRoutes(silences: delivery.silences, audit: audit)
        let stream = StreamRoutes(engine: engine, keys: keys, maximumLife: streamLife)
        let backups = BackupRoutes(store: backup, audit: audit)
        let access = KeyRoutes(keys: keys, audit: audit)
        return DashboardRoutes.routes + [
            APIRoute(.get, "/livez", health.livez),
            APIRoute(.get, "/readyz", health.readyz),
            APIRoute(.get, "/metrics", health.metrics),
            APIRoute(.get, "/openapi.yaml", health.openapi),
            APIRoute(.post, "/v1/events", events.ingest),
            APIRoute(.post, "/v1/attest/challenge", attest.challenge),
            APIRoute(.post, "/v1/attest", attest.attest),
            APIRoute(.post, "/v1/attest/token", attest.token),
            APIRoute(.get, "/v1/devices", devices.list),
            APIRoute(.get, "/v1/devices/:deviceId", devices.status),
            APIRoute(.delete, "/v1/devices/:deviceId", devices.erase),
            APIRoute(.get, "/v1/summary", fleet.summary),
            APIRoute(.get, "/v1/summary/scopes", fleet.scopes),
            APIRoute(.get, "/v1/summary/history", fleet.history),
            APIRoute(.get, "/v1/releases", fleet.releases),
            APIRoute(.get, "/v1/stream", stream.stream),
            APIRoute(.get, "/v1/alerts", fleet.alerts),
            APIRoute(.get, "/v1/incidents", fleet.incidents),
            APIRoute(.get, "/v1/incidents/:id", fleet.incident),
            APIRoute(.post, "/v1/webhooks", hooks.create),
            APIRoute(.get, "/v1/webhooks", hooks.list),
            APIRoute(.get, "/v1/webhooks/:id", hooks.get),
            APIRoute(.delete, "/v1/webhooks/:id", hooks.delete),
            APIRoute(.get, "/v1/webhooks/:id/deliveries", hooks.deliveries),
            APIRoute(.post, "/v1/webhooks/:id/deliveries/:deliveryId/resend", hooks.resend),
            APIRoute(.post, "/v1/silences", silences.create),
            APIRoute(.get, "/v1/silences", silences.list),
            APIRoute(.get, "/v1/silences/:id", silences.get),
            APIRoute(.delete, "/v1/silences/:id", silences.delete),
            APIRoute(.get, "/v1/backup", backups.backup),
            APIRoute(.post, "/v1/keys", access.create),
            APIRoute(.get, "/v1/keys", access.list),
            APIRoute(.get, "/v1/keys/current", access.current),
            APIRoute(.delete, "/v1/keys/:id", access.delete),
            APIRoute(.get, "/v1/audit", access.auditLog),
        ]
    }

    /// Opens the store named by the configuration: PostgreSQL (shared by replicas) for `SYNCHEALTH_DATABASE_URL`,
    /// else SQLite. The second value is a service the store needs running: PostgreSQL's connection pool, or SQLite's
    /// maintenance (folding the journal into the tables, checkpoints).
    public static func makeStore(_ configuration: ServiceConfiguration, logger: Logger) throws -> (store: MonitorStore, service: (any Service)?) {
        if let url = configuration.databaseURL, !url.isEmpty {
            let store = try PostgresStore(url: url, deliveryLease: configuration.webhookLease, logger: logger)
            return (.shared(store), store.service)
        }
        let store = try SQLiteStore(
            directory: configuration.dataDirectory,
            synchronous: configuration.sqliteSynchronous,
            commitPath: configuration.sqliteCommit,
            // Eight generations in the window: a lookup seeks each, and an id outlives the window by at most one.
            eventIdGeneration: configuration.engine.dedupeRetention / 7,
            foldInterval: configuration.sqliteFoldInterval
        )
        return (.local(store), store.maintenance(logger: logger))
    }

    /// Resolves the keys: configured ones, or the generated ones kept in the data directory.
    public static func resolveKeys(_ configuration: ServiceConfiguration, logger: Logger) throws -> KeyRing {
        var ingest = configuration.ingestKeys
        var admin = configuration.adminKeys
        if ingest.isEmpty || admin.isEmpty {
            let generated = try GeneratedKeys.loadOrCreate(in: configuration.dataDirectory)
            if ingest.isEmpty { ingest = [generated.keys.ingestKey] }
            if admin.isEmpty { admin = [generated.keys.adminKey] }
            logger.notice(
                generated.created ? "Generated API keys" : "Using generated API keys",
                metadata: ["keys.path": "\(generated.path)"]
            )
        }
        return try KeyRing.checked(ingest: ingest, read: configuration.readKeys, admin: admin, metrics: configuration.metricsKey.map { [$0] } ?? [])
    }

    /// Builds the whole service: keys, store, engine (a service of the application) and HTTP server.
    public static func build(
        configuration: ServiceConfiguration,
        logger: Logger,
        registry: PrometheusCollectorRegistry,
        clock: any ServiceClock = SystemClock()
    ) throws -> (application: Application<RouterResponder<AppRequestContext>>, engine: any MonitorEngine, delivery: Delivery) {
        let keys = try resolveKeys(configuration, logger: logger)
        let tls = try configuration.tlsCertificate.map { certificate throws(TLSCertificateError) in
            try TLSCertificates(certificatePath: certificate, keyPath: configuration.tlsKey ?? "")
        }
        if tls != nil, configuration.metricsKey == nil {
            // TLS served by the service itself means its port is the public side: /metrics names apps, containers
            // and versions to anyone who asks.
            logger.warning(
                "Metrics are open on a public port: set SYNCHEALTH_METRICS_KEY",
                metadata: ["metrics.path": "/metrics", "tls.certificate": "\(configuration.tlsCertificate ?? "")"]
            )
        }
        let verifier = try configuration.appAttestRoot.map { path in
            try AppAttestVerifier(pem: String(contentsOfFile: path, encoding: .utf8))
        }
        let (store, storeService) = try makeStore(configuration, logger: logger)
        return assemble(
            store: store,
            storeService: storeService,
            keys: keys,
            configuration: configuration,
            transport: CurlTransport(proxy: configuration.webhookProxy),
            clock: clock,
            registry: registry,
            logger: logger,
            tls: tls,
            appAttestVerifier: verifier
        )
    }

    /// Builds the service over an opened store and resolved keys: the part of `build` that tests run with a store,
    /// a transport and a clock of their own.
    public static func assemble(
        store: MonitorStore,
        storeService: (any Service)?,
        keys: KeyRing,
        configuration: ServiceConfiguration,
        transport: any WebhookTransport,
        clock: any ServiceClock,
        registry: PrometheusCollectorRegistry,
        logger: Logger,
        tls: TLSCertificates? = nil,
        appAttestVerifier: AppAttestVerifier? = nil
    ) -> (application: Application<RouterResponder<AppRequestContext>>, engine: any MonitorEngine, delivery: Delivery) {
        // What tells ops, built beside the engine: silences, subscriptions, and the outbox's sender.
        let delivery = store.makeDelivery(clock: clock, configuration: configuration.webhooks, transport: transport, logger: logger)
        let engine = store.makeEngine(clock: clock, configuration: configuration.engine, delivery: delivery, logger: logger)
        // The embedded store backs itself up (`GET /v1/backup`); PostgreSQL is backed up with its own tools.
        let backup = store.store as? any StoreBackup
        if let backup { BackupRoutes.removeLeftovers(in: backup.backupDirectory) }
        let directory = KeyDirectory(
            configured: keys,
            store: store.store,
            clock: clock,
            auditRetention: configuration.engine.alertRetention,
            limit: configuration.keyLimit,
            logger: logger
        )
        let tokens = DeviceTokenKeys(store: store.store, lifetime: configuration.deviceTokenLifetime)
        let attestation = AppAttestGate(
            policy: configuration.appAttest,
            verifier: appAttestVerifier ?? AppAttestGate.apple,
            store: store.store,
            clock: clock,
            tokens: tokens
        )
        let router = makeRouter(
            engine: engine,
            delivery: delivery,
            keys: directory,
            registry: registry,
            limits: configuration.rateLimits,
            backup: backup,
            attestation: attestation,
            streamLife: configuration.streamMaximumLife
        )
        // Which release each replica runs, for a rolling upgrade's dashboards: `count by (version)`.
        registry.makeGauge(
            name: "synchealth_build_info",
            labels: [("version", BuildInfo.version), ("commit", BuildInfo.commit)],
            help: "The running build: its version and commit, as labels; always 1."
        ).set(1.0)
        let idle = TimeAmount.microseconds(configuration.idleTimeout.microseconds)
        let requestTimeout = TimeAmount.microseconds(configuration.requestTimeout.microseconds)
        let http1 = HTTP1Channel.Configuration(additionalChannelHandlers: [RequestGuardHandler(requestTimeout: requestTimeout)], idleTimeout: idle)
        // With certificates: HTTPS, HTTP/2 by ALPN beside HTTP/1.1, each new handshake served the certificates
        // loaded last (SIGHUP reloads them, `TLSReloadService`).
        let server: HTTPServerBuilder =
            if let tls {
                HTTPServerBuilder { responder in
                    try HTTP2UpgradeChannel(
                        tlsConfiguration: tls.serverConfiguration(),
                        configuration: .init(idleTimeout: configuration.idleTimeout, streamConfiguration: http1),
                        responder: responder
                    )
                }
            } else {
                .http1(configuration: http1)
            }
        let tlsReload: [any Service] = tls.map { [TLSReloadService(certificates: $0, logger: logger)] } ?? []
        // Device tokens exist only for apps that attest.
        let tokenRefresh: [any Service] = configuration.appAttest.apps.isEmpty ? [] : [DeviceTokenRefresh(keys: tokens, clock: clock, logger: logger)]
        let application = Application(
            router: router,
            server: server,
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port),
                serverName: "synchealth",
                availableConnectionsDelegate: MaximumAvailableConnections(configuration.maxConnections, logger: logger)
            ),
            // Shutdown runs in reverse: the engine commits what it accepted before the pool stops.
            services: (storeService.map { [$0] } ?? []) + store.services(of: engine, delivery: delivery, logger: logger) + [
                directory, HeapTrimmer(logger: logger),
            ]
                + tokenRefresh + tlsReload,
            logger: logger
        )
        return (application, engine, delivery)
    }
}

/// One endpoint: method, path (with `:parameter` segments) and handler.
struct APIRoute: Sendable {
    let method: HTTPRequest.Method
    let path: String
    let handler: @Sendable (Request, AppRequestContext) async throws -> Response

    init(_ method: HTTPRequest.Method, _ path: String, _ handler: @escaping @Sendable (Request, AppRequestContext) async throws -> Response) {
        self.method = method
        self.path = path
        self.handler = handler
    }
}

/// Rate limits: token buckets per device (on `POST /v1/events`) and per API key.
public struct RateLimits: Sendable {
    /// Per device: 20 requests/s sustained, bursts of 100. `nil` turns it off.
    public var perDevice: RateLimit? = .init(perSecond: 20, burst: 100)
    /// Per key: off by default, since one ingest key usually serves a whole fleet.
    public var perKey: RateLimit?
    /// Per key on `POST /v1/attest/challenge` and `POST /v1/attest` together: each challenge is a durable write and
    /// each attestation a verification, while a fleet attests once an install.
    public var attestPerKey: RateLimit? = .init(perSecond: 50, burst: 500)
    /// Per device id on `POST /v1/attest`: an install attests once, and retries a few times at most.
    public var attestPerDevice: RateLimit? = .init(perSecond: 0.2, burst: 10)

    /// The defaults.
    public init() {}
}

/// `/livez`, `/readyz`, `/metrics`, `/openapi.yaml`: no key needed, but for `/metrics` once a metrics key is set.
struct ServiceRoutes<Engine: MonitorEngine> {
    let engine: Engine
    let keys: KeyDirectory
    let registry: PrometheusCollectorRegistry
    /// `SYNCHEALTH_METRICS_KEY` is set: `/metrics` needs it, or a read or admin key.
    var metricsNeedKey = false
    /// Most (app, container) label sets of the per-app fleet series.
    var maxFleetLabelSets = 100

    func livez(_ request: Request, context: AppRequestContext) async throws -> Response {
        HealthBody.response(HealthBody.alive)
    }

    /// Ready once the engine has loaded its state and its live feed is built: on a shared store that is once the
    /// replica listens to every replica's transitions (`TransitionFollower`), so that a stream opened on a replica
    /// just put behind a load balancer misses none and gets no `reset` for a rebuild still to come.
    func readyz(_ request: Request, context: AppRequestContext) async throws -> Response {
        if engine.isReady && engine.feed.rebuilds > 0 && keys.isLoaded {
            return HealthBody.response(HealthBody.ready)
        }
        return HealthBody.response(HealthBody.notReady, status: .serviceUnavailable)
    }

    func metrics(_ request: Request, context: AppRequestContext) async throws -> Response {
        if metricsNeedKey {
            try context.require(.metrics)
            // The series name every app: a key limited to some may not read them.
            try context.requireGlobal()
        }
        var buffer: [UInt8] = []
        buffer.reserveCapacity(16 * 1024)
        registry.emit(into: &buffer)
        if engine.isReady, let scopes = try? await engine.summaries() {
            FleetMetrics.write(scopes, maxLabelSets: maxFleetLabelSets, into: &buffer)
        }
        if engine.isReady, let releases = try? await engine.appVersions() {
            ReleaseMetrics.write(
                releases,
                minimumDevices: engine.configuration.alerts.releaseMinimumDevices,
                maxLabelSets: maxFleetLabelSets,
                into: &buffer
            )
        }
        return Response(
            status: .ok,
            headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: buffer))
        )
    }

    func openapi(_ request: Request, context: AppRequestContext) async throws -> Response {
        Response(status: .ok, headers: [.contentType: "application/yaml"], body: .init(byteBuffer: ByteBuffer(bytes: PackageResources.openapi_yaml)))
    }
}
