public import Logging
public import SyncHealthAttest
import SyncHealthCore
public import SyncHealthEngine
public import SyncHealthSQLite
import SyncHealthStore

/// Everything `synchealth serve` can be told, from the environment or flags (`ServiceSetting.all` declares how).
public struct ServiceConfiguration: Sendable {
    /// Listen host.
    public var host = "127.0.0.1"
    /// Listen port (0 picks a free one).
    public var port = 8080
    /// Where the embedded store and generated keys live.
    public var dataDirectory = "./data"
    /// Keys that may post events.
    public var ingestKeys: [String] = []
    /// Keys that may read.
    public var readKeys: [String] = []
    /// Keys that may read and manage webhooks.
    public var adminKeys: [String] = []
    /// When set, `GET /metrics` answers only to this key or a read or admin key (`Authorization: Bearer …`).
    public var metricsKey: String?
    /// The proxy webhook deliveries go through; `nil`: none, whatever the environment's proxy variables say.
    public var webhookProxy: String?
    /// Engine tunables, alert delays among them.
    public var engine = EngineConfiguration()
    /// Webhook delivery settings (`allowPrivate` is `SYNCHEALTH_WEBHOOK_ALLOW_PRIVATE`).
    public var webhooks = DeliveryConfiguration()
    /// `postgres://…` selects PostgreSQL instead of the embedded store.
    public var databaseURL: String?
    /// With PostgreSQL: how long a replica holds a webhook message it is sending before another may.
    public var webhookLease: Duration = .seconds(60)
    /// SQLite's durability setting.
    public var sqliteSynchronous: SQLiteStore.Synchronous = .full
    /// How a commit to SQLite becomes durable: in the commit journal, or straight in the tables.
    public var sqliteCommit: SQLiteStore.CommitPath = .journal
    /// How old SQLite's journal backlog gets before it is folded into the tables.
    public var sqliteFoldInterval: Duration = SQLiteStore.defaultFoldInterval
    /// Token buckets per device and per key.
    public var rateLimits = RateLimits()
    /// Most open connections; more wait in the listen backlog until one closes.
    public var maxConnections = 4096
    /// A request must arrive in full within this time of the connection opening or the previous response;
    /// otherwise `408` and the connection closes (bounds clients that trickle bytes).
    public var requestTimeout: Duration = .seconds(30)
    /// Seconds an idle connection stays open.
    public var idleTimeout: Duration = .seconds(60)
    /// The least level logged.
    public var logLevel: Logger.Level = .info
    /// A PEM file with the certificate chain: with `tlsKey`, the service serves HTTPS (and HTTP/2) itself.
    public var tlsCertificate: String?
    /// The PEM file with the certificate's private key.
    public var tlsKey: String?
    /// The apps whose devices attest with App Attest (`SYNCHEALTH_APP_ATTEST`), and whether development keys count.
    public var appAttest = AppAttestPolicy()
    /// A PEM file of roots that replaces Apple's App Attestation root (for tests, and for Apple's next root).
    public var appAttestRoot: String?
    /// How long a device token (`POST /v1/attest/token`) is valid.
    public var deviceTokenLifetime: Duration = .seconds(3600)
    /// How long a live stream (`GET /v1/stream`) lasts before the service ends it and the client reconnects.
    public var streamMaximumLife: Duration = .seconds(3600)
    /// The most live keys made through `POST /v1/keys` for one app, and for every app.
    public var keyLimit: Int = 1000

    /// The defaults of the contract.
    public init() {}
}
