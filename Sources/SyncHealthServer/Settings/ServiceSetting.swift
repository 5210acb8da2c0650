import Foundation
import Logging
import SyncHealthAttest
import SyncHealthCore
import SyncHealthEngine
import SyncHealthStore

/// One setting of `synchealth serve`: its flag, environment variable, help, how its value is shown, and how
/// its text is read and checked. The default is the value `ServiceConfiguration()` holds, shown by `show`, so it
/// is written once.
public struct ServiceSetting: Sendable {
    /// The flag without its dashes (`port` is `--port`).
    public let flag: String
    /// What the setting does, one line, for `--help` and `docs/configuration.md`.
    public let help: String
    /// The default when the value shows as nothing (keys that are generated on first start, say).
    let emptyDefault: String
    /// The setting's value in a configuration, as one writes it.
    let show: @Sendable (ServiceConfiguration) -> String
    /// Reads and checks the text of the setting into a configuration; throws the reason it is refused.
    let apply: @Sendable (inout ServiceConfiguration, String) throws(ServiceSettingError) -> Void

    /// The environment variable: `SYNCHEALTH_` and the flag in capitals (`SYNCHEALTH_DATA_DIR`).
    public var variable: String {
        "SYNCHEALTH_" + String(flag.map { $0 == "-" ? "_" : Character($0.uppercased()) })
    }

    /// The setting's value in `configuration`, as one would write it (empty where it has none).
    public func shown(in configuration: ServiceConfiguration) -> String {
        show(configuration)
    }

    /// The default, as `--help` and the docs show it.
    public var defaultText: String {
        let shown = show(ServiceConfiguration())
        return shown.isEmpty ? emptyDefault : shown
    }
}

/// A setting's text that cannot be used, with the reason (it names the variable and the value).
public struct ServiceSettingError: Error, Equatable, CustomStringConvertible {
    /// The reason, as the service prints it before it exits.
    public let description: String

    /// An error with this reason.
    public init(description: String) {
        self.description = description
    }
}

extension ServiceSetting {
    /// Every setting of `synchealth serve`, in the order `--help` and the docs list them.
    public static let all: [ServiceSetting] = [
        text("host", "Listen address.", \.host),
        ServiceSetting(
            flag: "port",
            help: "Listen port; 0 picks a free one.",
            emptyDefault: "",
            show: { "\($0.port)" },
            apply: { c, text throws(ServiceSettingError) in
                guard let port = Int(text), (0...65535).contains(port) else { throw .init(description: "is not a port (0 to 65535)") }
                c.port = port
            }
        ),
        text("data-dir", "Where the embedded store and generated keys live.", \.dataDirectory),
        keys(
            "ingest-keys",
            "Comma-separated keys that devices use to post events; KEY@appId binds a key to an app.",
            \.ingestKeys,
            emptyDefault: "generated on first start"
        ),
        keys("read-keys", "Comma-separated keys that may read status, summaries and alerts.", \.readKeys, emptyDefault: "none"),
        keys("admin-keys", "Comma-separated keys that may also manage webhooks and silences.", \.adminKeys, emptyDefault: "generated on first start"),
        ServiceSetting(
            flag: "metrics-key",
            help: "When set, GET /metrics needs this key (or a read or admin key) as a bearer token, as Prometheus's authorization sends it.",
            emptyDefault: "none: /metrics is open",
            show: { $0.metricsKey ?? "" },
            apply: { c, text throws(ServiceSettingError) in
                guard text.count >= KeyRing.minimumKeyLength else {
                    throw .init(description: "must be at least \(KeyRing.minimumKeyLength) characters")
                }
                c.metricsKey = text
            }
        ),
        duration("not-syncing-after", "Delay of the notSyncing alert.", \.engine.alerts.notSyncingAfter),
        duration("error-after", "Delay of syncError for errors that are not developer or dataLoss.", \.engine.alerts.errorAfter),
        duration("stalled-after", "Delay of syncStalled.", \.engine.alerts.stalledAfter),
        duration("export-at-risk-after", "Delay of exportAtRisk.", \.engine.alerts.exportAtRiskAfter),
        duration("silent-after", "When a device counts as silent.", \.engine.alerts.silentAfter),
        duration("group-wait", "How long an incident is open before its first message, so that its devices gather.", \.engine.incidents.groupWait),
        duration(
            "group-interval",
            "Least time between two messages about one incident whose device count changes.",
            \.engine.incidents.groupInterval
        ),
        ServiceSetting(
            flag: "release-min-devices",
            help: "Fewest active devices a release needs before it can be a regression.",
            emptyDefault: "",
            show: { "\($0.engine.alerts.releaseMinimumDevices)" },
            apply: { c, text throws(ServiceSettingError) in
                guard let n = Int(text), n >= 1 else { throw .init(description: "must be a positive integer") }
                c.engine.alerts.releaseMinimumDevices = n
            }
        ),
        duration(
            "release-check-interval",
            "How often every app's releases are judged, to fire or resolve releaseRegression.",
            \.engine.releaseCheckInterval,
            atLeast: .seconds(1)
        ),
        duration(
            "dedupe-window",
            "How long event ids are remembered, so that a repeat is dropped; they are kept up to a seventh longer.",
            \.engine.dedupeRetention,
            atLeast: .seconds(7)
        ),
        retention(
            "forget-after",
            "A device not seen for this long is forgotten: its state, counts and list entries go, its alerts resolve; off keeps every device.",
            \.engine.forgetAfter
        ),
        retention(
            "alert-retention",
            "How long resolved alerts, resolved incidents and webhook delivery attempts are kept; off keeps them all.",
            \.engine.alertRetention
        ),
        toggle("webhook-allow-private", "1 lets webhooks target loopback and private addresses.", \.webhooks.allowPrivate),
        ServiceSetting(
            flag: "webhook-proxy",
            help: "A proxy every webhook delivery goes through (http://host:port); unset, none is used, whatever http_proxy and the like say.",
            emptyDefault: "none",
            show: { $0.webhookProxy ?? "" },
            apply: { c, text throws(ServiceSettingError) in
                guard let url = URL(string: text), ["http", "https", "socks5", "socks5h"].contains(url.scheme ?? ""), url.host != nil else {
                    throw .init(description: "must be a proxy URL, e.g. http://proxy.internal:3128")
                }
                c.webhookProxy = text
            }
        ),
        ServiceSetting(
            flag: "public-url",
            help: "The dashboard's address as ops open it, for links in Slack messages.",
            emptyDefault: "none",
            show: { $0.engine.publicURL ?? "" },
            apply: { c, text throws(ServiceSettingError) in
                guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                    throw .init(description: "must be an http or https URL, e.g. https://synchealth.example.com")
                }
                c.engine.publicURL = text
            }
        ),
        ServiceSetting(
            flag: "webhook-retry-schedule",
            help: "Delays before each webhook attempt.",
            emptyDefault: "",
            show: { $0.webhooks.retrySchedule.map(\.configurationText).joined(separator: ",") },
            apply: { c, text throws(ServiceSettingError) in
                let parts = text.split(separator: ",").map { Duration(configuration: String($0)) }
                guard !parts.isEmpty, parts.allSatisfy({ $0 != nil }) else {
                    throw .init(description: "must be comma-separated durations, e.g. 0,5s,5m,30m")
                }
                c.webhooks.retrySchedule = parts.compactMap { $0 }
            }
        ),
        rateLimit("device-rate-limit", "Requests per second per device on POST /v1/events, as RATE/BURST, or off.", \.rateLimits.perDevice),
        rateLimit("key-rate-limit", "Requests per second per API key, as RATE/BURST, or off.", \.rateLimits.perKey),
        rateLimit(
            "attest-rate-limit",
            "Requests per second per API key on POST /v1/attest/challenge and POST /v1/attest together, as RATE/BURST, or off.",
            \.rateLimits.attestPerKey
        ),
        rateLimit(
            "attest-device-rate-limit",
            "Requests per second per device id on POST /v1/attest, as RATE/BURST, or off.",
            \.rateLimits.attestPerDevice
        ),
        count(
            "key-limit",
            "Most live keys made through POST /v1/keys for one app, and for every app; more are refused with 409.",
            \.keyLimit
        ),
        count("max-connections", "Most open connections; more wait in the listen backlog.", \.maxConnections),
        duration(
            "request-timeout",
            "A request must arrive in full within this time of the connection opening or the previous response, else 408.",
            \.requestTimeout,
            atLeast: .milliseconds(1)
        ),
        duration("idle-timeout", "How long an idle or stalled connection stays open.", \.idleTimeout, atLeast: .milliseconds(1)),
        duration(
            "stream-max-life",
            "How long GET /v1/stream lasts before the service ends it; the client reconnects, and its key is checked again.",
            \.streamMaximumLife,
            atLeast: .seconds(1)
        ),
        ServiceSetting(
            flag: "database-url",
            help: "postgres://… selects PostgreSQL, for several replicas on one database, instead of the embedded SQLite store.",
            emptyDefault: "unset: SQLite",
            show: { $0.databaseURL ?? "" },
            apply: { c, text throws(ServiceSettingError) in
                guard text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") else {
                    throw .init(description: "must be a postgres:// URL, e.g. postgres://user:password@host:5432/database")
                }
                c.databaseURL = text
            }
        ),
        duration(
            "webhook-lease",
            "With PostgreSQL: how long a replica holds a webhook message it sends before another replica may (longer than one send).",
            \.webhookLease,
            atLeast: .seconds(20)
        ),
        ServiceSetting(
            flag: "replica-cache-devices",
            help:
                "With PostgreSQL: most devices a replica remembers (about 1.5 KB each) so that their groups are one round trip; 0 reads every group first.",
            emptyDefault: "",
            show: { "\($0.engine.sharedCacheDevices)" },
            apply: { c, text throws(ServiceSettingError) in
                guard let n = Int(text), n >= 0 else { throw .init(description: "must be a number of devices, 0 or more") }
                c.engine.sharedCacheDevices = n
            }
        ),
        choice(
            "sqlite-synchronous",
            "SQLite durability: full (survives power loss) or normal (survives process crashes).",
            \.sqliteSynchronous
        ),
        choice(
            "sqlite-commit",
            "journal (append each group to a journal, fold into the tables later) or tables (one transaction in the tables a group).",
            \.sqliteCommit
        ),
        duration(
            "fold-interval",
            "SQLite journal: how old its backlog gets before a fold writes it into the tables. Longer folds write fewer bytes an event, and hold more in memory and in the journal to replay after a crash.",
            \.sqliteFoldInterval,
            atLeast: .seconds(1)
        ),
        choice("log-level", "The least level logged.", \.logLevel),
        path(
            "tls-certificate",
            "A PEM file with the certificate chain; with tls-key, the service serves HTTPS, HTTP/2 beside HTTP/1.1, and SIGHUP reloads both files.",
            emptyDefault: "unset: plain HTTP",
            \.tlsCertificate
        ),
        path("tls-key", "The PEM file with the certificate's private key.", emptyDefault: "unset", \.tlsKey),
        ServiceSetting(
            flag: "app-attest",
            help: "Apps whose devices attest with App Attest: appId=TEAMID.bundleId:report|require, comma-separated (docs/security.md).",
            emptyDefault: "none",
            show: { c in
                c.appAttest.apps.values.sorted { $0.appId < $1.appId }.map { "\($0.appId)=\($0.appIdentifier):\($0.mode.rawValue)" }
                    .joined(separator: ",")
            },
            apply: { c, text throws(ServiceSettingError) in
                do {
                    c.appAttest.apps = try AppAttestPolicy(parsing: text, allowsDevelopment: false).apps
                } catch {
                    throw .init(description: "has \(error)")
                }
            }
        ),
        toggle(
            "app-attest-development",
            "1 also accepts App Attest keys of Apple's development environment (builds run from Xcode).",
            \.appAttest.allowsDevelopment
        ),
        path(
            "app-attest-root",
            "A PEM file of the roots App Attest certificates must chain to, in place of Apple's App Attestation root.",
            emptyDefault: "Apple's",
            \.appAttestRoot
        ),
        duration(
            "device-token-ttl",
            "How long a device token (POST /v1/attest/token) lets an attested device upload without an assertion.",
            \.deviceTokenLifetime,
            atLeast: .seconds(60)
        ),
    ]

    /// A setting that is on (`1`, `true`, `on`) or off (`0`, `false`, `off`).
    /// A positive integer.
    static func count(_ flag: String, _ help: String, _ path: any WritableKeyPath<ServiceConfiguration, Int> & Sendable) -> ServiceSetting {
        ServiceSetting(
            flag: flag,
            help: help,
            emptyDefault: "",
            show: { "\($0[keyPath: path])" },
            apply: { c, text throws(ServiceSettingError) in
                guard let n = Int(text), n >= 1 else { throw .init(description: "must be a positive integer") }
                c[keyPath: path] = n
            }
        )
    }

    static func toggle(_ flag: String, _ help: String, _ path: any WritableKeyPath<ServiceConfiguration, Bool> & Sendable) -> ServiceSetting {
        ServiceSetting(
            flag: flag,
            help: help,
            emptyDefault: "",
            show: { $0[keyPath: path] ? "1" : "0" },
            apply: { c, text throws(ServiceSettingError) in
                switch text.lowercased() {
                case "0", "false", "off": c[keyPath: path] = false
                case "1", "true", "on": c[keyPath: path] = true
                default: throw .init(description: "must be 1 or 0")
                }
            }
        )
    }

    /// A setting that names a file, unset by default.
    static func path(
        _ flag: String,
        _ help: String,
        emptyDefault: String,
        _ path: any WritableKeyPath<ServiceConfiguration, String?> & Sendable
    ) -> ServiceSetting {
        ServiceSetting(
            flag: flag,
            help: help,
            emptyDefault: emptyDefault,
            show: { $0[keyPath: path] ?? "" },
            apply: { c, text throws(ServiceSettingError) in
                c[keyPath: path] = text
            }
        )
    }

    static func text(_ flag: String, _ help: String, _ path: any WritableKeyPath<ServiceConfiguration, String> & Sendable) -> ServiceSetting {
        ServiceSetting(
            flag: flag,
            help: help,
            emptyDefault: "",
            show: { $0[keyPath: path] },
            apply: { c, text throws(ServiceSettingError) in
                c[keyPath: path] = text
            }
        )
    }

    /// A setting that is one of a type's cases, written as its raw value in any case.
    static func choice<Value: CaseIterable & RawRepresentable<String>>(
        _ flag: String,
        _ help: String,
        _ path: any WritableKeyPath<ServiceConfiguration, Value> & Sendable
    ) -> ServiceSetting {
        let words = Value.allCases.map { $0.rawValue.lowercased() }
        let list = words.dropLast().joined(separator: ", ") + (words.count > 1 ? " or " : "") + (words.last ?? "")
        return ServiceSetting(
            flag: flag,
            help: help + " One of: \(words.joined(separator: ", ")).",
            emptyDefault: "",
            show: { $0[keyPath: path].rawValue.lowercased() },
            apply: { c, text throws(ServiceSettingError) in
                guard let value = Value.allCases.first(where: { $0.rawValue.lowercased() == text.lowercased() }) else {
                    throw .init(description: "must be \(list)")
                }
                c[keyPath: path] = value
            }
        )
    }

    static func keys(
        _ flag: String,
        _ help: String,
        _ path: any WritableKeyPath<ServiceConfiguration, [String]> & Sendable,
        emptyDefault: String
    ) -> ServiceSetting {
        ServiceSetting(
            flag: flag,
            help: help,
            emptyDefault: emptyDefault,
            show: { $0[keyPath: path].joined(separator: ",") },
            apply: { c, text throws(ServiceSettingError) in
                c[keyPath: path] = text.split(separator: ",").map { String($0).trimmingWhitespace() }.filter { !$0.isEmpty }
            }
        )
    }

    /// A retention: a duration of at least a second, shown in days when it is whole days, or `off` (`nil`).
    static func retention(
        _ flag: String,
        _ help: String,
        _ path: any WritableKeyPath<ServiceConfiguration, Duration?> & Sendable
    ) -> ServiceSetting {
        ServiceSetting(
            flag: flag,
            help: help,
            emptyDefault: "",
            show: { c in
                guard let d = c[keyPath: path] else { return "off" }
                let (seconds, attoseconds) = d.components
                return seconds >= 86_400 && seconds % 86_400 == 0 && attoseconds == 0 ? "\(seconds / 86_400)d" : d.configurationText
            },
            apply: { c, text throws(ServiceSettingError) in
                if ["off", "never"].contains(text.lowercased()) {
                    c[keyPath: path] = nil
                    return
                }
                guard let d = Duration(configuration: text), d >= .seconds(1) else {
                    throw .init(description: "is not a duration of at least 1s (use 180d, 2h, 90s) or off")
                }
                c[keyPath: path] = d
            }
        )
    }

    static func duration(
        _ flag: String,
        _ help: String,
        _ path: any WritableKeyPath<ServiceConfiguration, Duration> & Sendable,
        atLeast minimum: Duration = .zero
    ) -> ServiceSetting {
        ServiceSetting(
            flag: flag,
            help: help,
            emptyDefault: "",
            show: { $0[keyPath: path].configurationText },
            apply: { c, text throws(ServiceSettingError) in
                guard let d = Duration(configuration: text) else {
                    throw .init(description: "is not a duration (use 90s, 15m, 2h or a number of seconds)")
                }
                guard d >= minimum else { throw .init(description: "must be a duration of at least \(minimum.configurationText)") }
                c[keyPath: path] = d
            }
        )
    }

    static func rateLimit(
        _ flag: String,
        _ help: String,
        _ path: any WritableKeyPath<ServiceConfiguration, RateLimit?> & Sendable
    ) -> ServiceSetting {
        ServiceSetting(
            flag: flag,
            help: help,
            emptyDefault: "",
            show: { c in c[keyPath: path].map { "\(Self.number($0.perSecond))/\(Self.number($0.burst))" } ?? "off" },
            apply: { c, text throws(ServiceSettingError) in
                if text.lowercased() == "off" || text == "0" {
                    c[keyPath: path] = nil
                    return
                }
                let parts = text.split(separator: "/").map { Double(String($0).trimmingWhitespace()) }
                guard parts.count == 2, let rate = parts[0], let burst = parts[1], rate > 0, rate.isFinite, burst >= 1, burst.isFinite else {
                    throw .init(description: "must be RATE/BURST requests per second, e.g. 20/100, or off")
                }
                c[keyPath: path] = RateLimit(perSecond: rate, burst: burst)
            }
        )
    }

    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? "\(Int(value))" : "\(value)"
    }
}
