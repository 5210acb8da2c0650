import ArgumentParser
import Foundation
import Hummingbird
import Logging
import Metrics
import Prometheus
import SyncHealthCore
import SyncHealthServer
import SyncHealthStore

/// `synchealth serve`: runs the service until SIGTERM or SIGINT.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the SyncHealth service.",
        discussion: """
            Every option can also be set in the environment, as the variable named in its help; a flag wins over \
            the environment. With no configuration at all, the service listens on 127.0.0.1:8080, keeps its \
            SQLite store in ./data, and generates an ingest key and an admin key there on first start.

            Durations are written 90s, 15m, 2h, or as a plain number of seconds (fractions allowed, e.g. 0.5).
            """
    )

    @Option(help: "Listen address. [SYNCHEALTH_HOST, default 127.0.0.1]")
    var host: String?

    @Option(help: "Listen port; 0 picks a free one. [SYNCHEALTH_PORT, default 8080]")
    var port: Int?

    @Option(name: .customLong("data-dir"), help: "Where the embedded store and generated keys live. [SYNCHEALTH_DATA_DIR, default ./data]")
    var dataDir: String?

    @Option(
        name: .customLong("ingest-keys"),
        help: "Comma-separated keys that devices use to post events; KEY@appId binds a key to an app. [SYNCHEALTH_INGEST_KEYS, default generated]"
    )
    var ingestKeys: String?

    @Option(
        name: .customLong("read-keys"),
        help: "Comma-separated keys that may read status, summaries and alerts. [SYNCHEALTH_READ_KEYS, default none]"
    )
    var readKeys: String?

    @Option(name: .customLong("admin-keys"), help: "Comma-separated keys that may also manage webhooks. [SYNCHEALTH_ADMIN_KEYS, default generated]")
    var adminKeys: String?

    @Option(name: .customLong("not-syncing-after"), help: "Delay of the notSyncing alert. [SYNCHEALTH_NOT_SYNCING_AFTER, default 60s]")
    var notSyncingAfter: String?

    @Option(
        name: .customLong("error-after"),
        help: "Delay of syncError for errors that are not developer or dataLoss. [SYNCHEALTH_ERROR_AFTER, default 120s]"
    )
    var errorAfter: String?

    @Option(name: .customLong("stalled-after"), help: "Delay of syncStalled. [SYNCHEALTH_STALLED_AFTER, default 15m]")
    var stalledAfter: String?

    @Option(name: .customLong("export-at-risk-after"), help: "Delay of exportAtRisk. [SYNCHEALTH_EXPORT_AT_RISK_AFTER, default 30m]")
    var exportAtRiskAfter: String?

    @Option(name: .customLong("silent-after"), help: "When a device counts as silent. [SYNCHEALTH_SILENT_AFTER, default 24h]")
    var silentAfter: String?

    @Option(
        name: .customLong("webhook-allow-private"),
        help: "1 lets webhooks target loopback and private addresses. [SYNCHEALTH_WEBHOOK_ALLOW_PRIVATE, default off]"
    )
    var webhookAllowPrivate: String?

    @Option(
        name: .customLong("public-url"),
        help: "The dashboard's address as ops open it, for links in Slack messages. [SYNCHEALTH_PUBLIC_URL, default none]"
    )
    var publicURL: String?

    @Option(
        name: .customLong("webhook-retry-schedule"),
        help: "Delays before each webhook attempt. [SYNCHEALTH_WEBHOOK_RETRY_SCHEDULE, default 0,5s,5m,30m,2h,5h,10h,10h]"
    )
    var webhookRetrySchedule: String?

    @Option(
        name: .customLong("device-rate-limit"),
        help: "Requests per second per device on POST /v1/events, as RATE/BURST, or off. [SYNCHEALTH_DEVICE_RATE_LIMIT, default 20/100]"
    )
    var deviceRateLimit: String?

    @Option(
        name: .customLong("key-rate-limit"),
        help: "Requests per second per API key, as RATE/BURST, or off. [SYNCHEALTH_KEY_RATE_LIMIT, default off]"
    )
    var keyRateLimit: String?

    @Option(name: .customLong("max-connections"), help: "Most open connections; more wait in the backlog. [SYNCHEALTH_MAX_CONNECTIONS, default 4096]")
    var maxConnections: String?

    @Option(name: .customLong("idle-timeout"), help: "How long an idle or stalled connection stays open. [SYNCHEALTH_IDLE_TIMEOUT, default 60s]")
    var idleTimeout: String?

    @Option(
        name: .customLong("request-timeout"),
        help:
            "A request must arrive in full within this time of the connection opening or the previous response, else 408. [SYNCHEALTH_REQUEST_TIMEOUT, default 30s]"
    )
    var requestTimeout: String?

    @Option(
        name: .customLong("database-url"),
        help: "postgres://… selects PostgreSQL instead of the embedded store. [SYNCHEALTH_DATABASE_URL, default unset]"
    )
    var databaseURL: String?

    @Option(
        name: .customLong("webhook-lease"),
        help:
            "With PostgreSQL: how long a replica holds a webhook message it sends before another replica may. [SYNCHEALTH_WEBHOOK_LEASE, default 60s]"
    )
    var webhookLease: String?

    @Option(
        name: .customLong("sqlite-synchronous"),
        help: "SQLite durability: full (survives power loss) or normal (survives process crashes). [SYNCHEALTH_SQLITE_SYNCHRONOUS, default full]"
    )
    var sqliteSynchronous: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical. [SYNCHEALTH_LOG_LEVEL, default info]")
    var logLevel: String?

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let settings = Settings(flags: flagValues, environment: environment)
        let configuration: ServiceConfiguration
        let level: Logger.Level
        do {
            configuration = try settings.serviceConfiguration()
            level = try settings.logLevel()
        } catch {
            throw ValidationError("\(error)")
        }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        // Round trips are small whole numbers: buckets that tell 2 (a group without conflict) from 3 and more.
        factory.valueHistogramBuckets["synchealth_postgres_round_trips_per_group"] = [1, 2, 3, 4, 6, 8, 16]
        MetricsSystem.bootstrap(factory)
        let logger = Logger(label: "synchealth")
        do {
            let built = try SyncHealthApplication.build(configuration: configuration, logger: logger, registry: registry)
            try await built.application.runService()
        } catch let error as StoreError {
            logger.critical("Cannot start", metadata: ["error": "\(error.description)"])
            throw ExitCode(1)
        }
    }

    var flagValues: [String: String] {
        var flags: [String: String] = [:]
        let pairs: [(String, String?)] = [
            ("SYNCHEALTH_HOST", host), ("SYNCHEALTH_PORT", port.map(String.init)), ("SYNCHEALTH_DATA_DIR", dataDir),
            ("SYNCHEALTH_INGEST_KEYS", ingestKeys), ("SYNCHEALTH_READ_KEYS", readKeys), ("SYNCHEALTH_ADMIN_KEYS", adminKeys),
            ("SYNCHEALTH_NOT_SYNCING_AFTER", notSyncingAfter), ("SYNCHEALTH_ERROR_AFTER", errorAfter),
            ("SYNCHEALTH_STALLED_AFTER", stalledAfter), ("SYNCHEALTH_EXPORT_AT_RISK_AFTER", exportAtRiskAfter),
            ("SYNCHEALTH_SILENT_AFTER", silentAfter), ("SYNCHEALTH_WEBHOOK_ALLOW_PRIVATE", webhookAllowPrivate),
            ("SYNCHEALTH_WEBHOOK_RETRY_SCHEDULE", webhookRetrySchedule), ("SYNCHEALTH_PUBLIC_URL", publicURL),
            ("SYNCHEALTH_DEVICE_RATE_LIMIT", deviceRateLimit), ("SYNCHEALTH_KEY_RATE_LIMIT", keyRateLimit),
            ("SYNCHEALTH_MAX_CONNECTIONS", maxConnections), ("SYNCHEALTH_IDLE_TIMEOUT", idleTimeout),
            ("SYNCHEALTH_REQUEST_TIMEOUT", requestTimeout),
            ("SYNCHEALTH_DATABASE_URL", databaseURL), ("SYNCHEALTH_WEBHOOK_LEASE", webhookLease),
            ("SYNCHEALTH_SQLITE_SYNCHRONOUS", sqliteSynchronous),
            ("SYNCHEALTH_LOG_LEVEL", logLevel),
        ]
        for (name, value) in pairs { if let value { flags[name] = value } }
        return flags
    }
}
