import Foundation
import Logging
import SyncHealthCore
import SyncHealthEngine
import SyncHealthServer
import SyncHealthStore

/// Reads the contract's variables from flags (which win) and the environment.
struct Settings {
    let flags: [String: String]
    let environment: [String: String]

    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    func value(_ name: String) -> String? {
        if let flag = flags[name] { return flag }
        if let env = environment[name], !env.isEmpty { return env }
        return nil
    }

    func keys(_ name: String) -> [String] {
        (value(name) ?? "").split(separator: ",").map { String($0).trimmingWhitespace() }.filter { !$0.isEmpty }
    }

    func duration(_ name: String, default fallback: Duration) throws -> Duration {
        guard let text = value(name) else { return fallback }
        guard let d = Duration(configuration: text) else {
            throw Invalid(description: "\(name)=\(text) is not a duration (use 90s, 15m, 2h or a number of seconds)")
        }
        return d
    }

    func serviceConfiguration() throws -> ServiceConfiguration {
        var c = ServiceConfiguration()
        if let host = value("SYNCHEALTH_HOST") { c.host = host }
        if let text = value("SYNCHEALTH_PORT") {
            guard let port = Int(text), (0...65535).contains(port) else { throw Invalid(description: "SYNCHEALTH_PORT=\(text) is not a port") }
            c.port = port
        }
        if let dir = value("SYNCHEALTH_DATA_DIR") { c.dataDirectory = dir }
        c.ingestKeys = keys("SYNCHEALTH_INGEST_KEYS")
        c.readKeys = keys("SYNCHEALTH_READ_KEYS")
        c.adminKeys = keys("SYNCHEALTH_ADMIN_KEYS")
        let d = AlertConfiguration()
        c.engine.alerts.notSyncingAfter = try duration("SYNCHEALTH_NOT_SYNCING_AFTER", default: d.notSyncingAfter)
        c.engine.alerts.errorAfter = try duration("SYNCHEALTH_ERROR_AFTER", default: d.errorAfter)
        c.engine.alerts.stalledAfter = try duration("SYNCHEALTH_STALLED_AFTER", default: d.stalledAfter)
        c.engine.alerts.exportAtRiskAfter = try duration("SYNCHEALTH_EXPORT_AT_RISK_AFTER", default: d.exportAtRiskAfter)
        c.engine.alerts.silentAfter = try duration("SYNCHEALTH_SILENT_AFTER", default: d.silentAfter)
        if let url = value("SYNCHEALTH_PUBLIC_URL") {
            guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil else {
                throw Invalid(description: "SYNCHEALTH_PUBLIC_URL=\(url) must be an http or https URL, e.g. https://synchealth.example.com")
            }
            c.engine.publicURL = url
        }
        switch value("SYNCHEALTH_WEBHOOK_ALLOW_PRIVATE") {
        case nil, "0", "false", "off": c.webhooks.allowPrivate = false
        case "1", "true", "on": c.webhooks.allowPrivate = true
        case let other?: throw Invalid(description: "SYNCHEALTH_WEBHOOK_ALLOW_PRIVATE=\(other) must be 1 or 0")
        }
        if let text = value("SYNCHEALTH_WEBHOOK_RETRY_SCHEDULE") {
            let parts = text.split(separator: ",").map { Duration(configuration: String($0)) }
            guard !parts.isEmpty, parts.allSatisfy({ $0 != nil }) else {
                throw Invalid(description: "SYNCHEALTH_WEBHOOK_RETRY_SCHEDULE=\(text) must be comma-separated durations, e.g. 0,5s,5m,30m")
            }
            c.webhooks.retrySchedule = parts.compactMap { $0 }
        }
        c.rateLimits.perDevice = try rateLimit("SYNCHEALTH_DEVICE_RATE_LIMIT", default: c.rateLimits.perDevice)
        c.rateLimits.perKey = try rateLimit("SYNCHEALTH_KEY_RATE_LIMIT", default: c.rateLimits.perKey)
        if let text = value("SYNCHEALTH_MAX_CONNECTIONS") {
            guard let n = Int(text), n >= 1 else { throw Invalid(description: "SYNCHEALTH_MAX_CONNECTIONS=\(text) must be a positive integer") }
            c.maxConnections = n
        }
        if let text = value("SYNCHEALTH_IDLE_TIMEOUT") {
            guard let d = Duration(configuration: text), d > .zero else {
                throw Invalid(description: "SYNCHEALTH_IDLE_TIMEOUT=\(text) is not a duration")
            }
            c.idleTimeout = d
        }
        if let text = value("SYNCHEALTH_REQUEST_TIMEOUT") {
            guard let d = Duration(configuration: text), d > .zero else {
                throw Invalid(description: "SYNCHEALTH_REQUEST_TIMEOUT=\(text) is not a duration")
            }
            c.requestTimeout = d
        }
        c.databaseURL = value("SYNCHEALTH_DATABASE_URL")
        if let text = value("SYNCHEALTH_WEBHOOK_LEASE") {
            guard let d = Duration(configuration: text), d >= .seconds(20) else {
                throw Invalid(description: "SYNCHEALTH_WEBHOOK_LEASE=\(text) must be a duration of at least 20s (longer than one send)")
            }
            c.webhookLease = d
        }
        if let text = value("SYNCHEALTH_SQLITE_SYNCHRONOUS") {
            guard let mode = SQLiteStore.Synchronous(rawValue: text.uppercased()) else {
                throw Invalid(description: "SYNCHEALTH_SQLITE_SYNCHRONOUS=\(text) must be full or normal")
            }
            c.sqliteSynchronous = mode
        }
        return c
    }

    /// `RATE/BURST` requests per second (e.g. `20/100`), or `off`.
    func rateLimit(_ name: String, default fallback: RateLimit?) throws -> RateLimit? {
        guard let text = value(name) else { return fallback }
        if text.lowercased() == "off" || text == "0" { return nil }
        let parts = text.split(separator: "/").map { Double(String($0).trimmingWhitespace()) }
        guard parts.count == 2, let rate = parts[0], let burst = parts[1], rate > 0, burst >= 1 else {
            throw Invalid(description: "\(name)=\(text) must be RATE/BURST requests per second, e.g. 20/100, or off")
        }
        return RateLimit(perSecond: rate, burst: burst)
    }

    func logLevel() throws -> Logger.Level {
        guard let text = value("SYNCHEALTH_LOG_LEVEL") else { return .info }
        guard let level = Logger.Level(rawValue: text.lowercased()) else {
            throw Invalid(description: "SYNCHEALTH_LOG_LEVEL=\(text) is not a log level")
        }
        return level
    }
}
