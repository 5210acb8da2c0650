import Foundation
import Logging
import SyncHealthCore
import SyncHealthEngine
import SyncHealthSQLite
import SyncHealthServer
import SyncHealthStore
import Testing

@Suite struct ServiceSettingTests {
    @Test func noSettingsGiveTheDefaultsAndEachShownDefaultReadsBackAsItself() throws {
        let defaults = ServiceConfiguration()
        let resolved = try ServiceSetting.resolve(arguments: [], environment: [:])
        for setting in ServiceSetting.all {
            #expect(setting.shown(in: resolved) == setting.shown(in: defaults), "\(setting.flag)")
            let shown = setting.shown(in: defaults)
            guard !shown.isEmpty else { continue }
            #expect(shown == setting.defaultText)
            let again = try ServiceSetting.resolve(arguments: ["--\(setting.flag)", shown], environment: [:])
            for other in ServiceSetting.all {
                #expect(other.shown(in: again) == other.shown(in: defaults), "--\(setting.flag) \(shown) leaves \(other.flag) as it was")
            }
        }
    }

    @Test func aFlagWinsOverTheEnvironmentAndAnEmptyVariableCountsAsUnset() throws {
        let environment = ["SYNCHEALTH_PORT": "9000", "SYNCHEALTH_HOST": "", "SYNCHEALTH_SILENT_AFTER": "2h"]
        let c = try ServiceSetting.resolve(arguments: ["--port", "9100", "--stalled-after=90s"], environment: environment)
        #expect(c.port == 9100)
        #expect(c.host == "127.0.0.1")
        #expect(c.engine.alerts.silentAfter == .seconds(7200))
        #expect(c.engine.alerts.stalledAfter == .seconds(90))
    }

    @Test func everyKindOfValueIsReadIntoTheConfiguration() throws {
        let c = try ServiceSetting.resolve(
            arguments: [
                "--ingest-keys", " a , b@app ,", "--webhook-allow-private", "on", "--webhook-retry-schedule", "0,250ms,2m",
                "--device-rate-limit", "off", "--key-rate-limit", "2.5/10", "--sqlite-synchronous", "normal", "--log-level", "DEBUG",
                "--database-url", "postgres://u:p@127.0.0.1:5432/d", "--public-url", "https://sh.example.com",
            ],
            environment: ["SYNCHEALTH_MAX_CONNECTIONS": "12"]
        )
        #expect(c.ingestKeys == ["a", "b@app"])
        #expect(c.webhooks.allowPrivate)
        #expect(c.webhooks.retrySchedule == [.zero, .milliseconds(250), .seconds(120)])
        #expect(c.rateLimits.perDevice == nil)
        #expect(c.rateLimits.perKey == RateLimit(perSecond: 2.5, burst: 10))
        #expect(c.sqliteSynchronous == .normal)
        #expect(c.logLevel == .debug)
        #expect(c.databaseURL == "postgres://u:p@127.0.0.1:5432/d")
        #expect(c.engine.publicURL == "https://sh.example.com")
        #expect(c.maxConnections == 12)
        #expect(ServiceConfiguration().engine.forgetAfter == .seconds(180 * 86_400))
        #expect(try ServiceSetting.resolve(arguments: ["--forget-after", "off"], environment: [:]).engine.forgetAfter == nil)
        #expect(try ServiceSetting.resolve(arguments: [], environment: ["SYNCHEALTH_FORGET_AFTER": "3s"]).engine.forgetAfter == .seconds(3))
    }

    @Test(arguments: [
        ("--port", "70000", "--port=70000 is not a port (0 to 65535)"),
        ("--port", "http", "--port=http is not a port (0 to 65535)"),
        ("--not-syncing-after", "soon", "--not-syncing-after=soon is not a duration (use 90s, 15m, 2h or a number of seconds)"),
        ("--webhook-lease", "5s", "--webhook-lease=5s must be a duration of at least 20s"),
        ("--idle-timeout", "0", "--idle-timeout=0 must be a duration of at least 1ms"),
        ("--device-rate-limit", "0/0", "--device-rate-limit=0/0 must be RATE/BURST requests per second, e.g. 20/100, or off"),
        ("--key-rate-limit", "5", "--key-rate-limit=5 must be RATE/BURST requests per second, e.g. 20/100, or off"),
        ("--max-connections", "0", "--max-connections=0 must be a positive integer"),
        ("--forget-after", "0", "--forget-after=0 is not a duration of at least 1s (use 180d, 2h, 90s) or off"),
        ("--replica-cache-devices", "-1", "--replica-cache-devices=-1 must be a number of devices, 0 or more"),
        ("--public-url", "ftp://x", "--public-url=ftp://x must be an http or https URL, e.g. https://synchealth.example.com"),
        ("--webhook-retry-schedule", "1s,,x", "--webhook-retry-schedule=1s,,x must be comma-separated durations, e.g. 0,5s,5m,30m"),
        ("--webhook-allow-private", "maybe", "--webhook-allow-private=maybe must be 1 or 0"),
        ("--sqlite-synchronous", "off", "--sqlite-synchronous=off must be normal or full"),
        ("--log-level", "loud", "--log-level=loud must be trace, debug, info, notice, warning, error or critical"),
        ("--sqlite-commit", "wal", "--sqlite-commit=wal must be journal or tables"),
        ("--fold-interval", "0", "--fold-interval=0 must be a duration of at least 1s"),
        ("--database-url", "mysql://x", "--database-url=mysql://x must be a postgres:// URL, e.g. postgres://user:password@host:5432/database"),
    ])
    func aValueThatCannotBeUsedIsRefusedWithItsNameAndReason(flag: String, value: String, message: String) {
        #expect(throws: ServiceSettingError(description: message)) {
            try ServiceSetting.resolve(arguments: [flag, value], environment: [:])
        }
    }

    @Test func aBadVariableIsNamedAsTheVariable() {
        #expect(throws: ServiceSettingError(description: "SYNCHEALTH_WEBHOOK_LEASE=1s must be a duration of at least 20s")) {
            try ServiceSetting.resolve(arguments: [], environment: ["SYNCHEALTH_WEBHOOK_LEASE": "1s"])
        }
    }

    @Test func unknownFlagsMissingValuesAndStrayArgumentsAreRefused() {
        #expect(throws: ServiceSettingError(description: "unknown option --prot")) {
            try ServiceSetting.resolve(arguments: ["--prot", "1"], environment: [:])
        }
        #expect(throws: ServiceSettingError(description: "--port needs a value")) {
            try ServiceSetting.resolve(arguments: ["--port"], environment: [:])
        }
        #expect(throws: ServiceSettingError(description: "unexpected argument 8080")) {
            try ServiceSetting.resolve(arguments: ["8080"], environment: [:])
        }
    }

    @Test func variablesAreTheFlagsInCapitalsAfterThePrefix() {
        let variables = Dictionary(uniqueKeysWithValues: ServiceSetting.all.map { ($0.flag, $0.variable) })
        #expect(variables["data-dir"] == "SYNCHEALTH_DATA_DIR")
        #expect(variables["export-at-risk-after"] == "SYNCHEALTH_EXPORT_AT_RISK_AFTER")
        #expect(Set(variables.values).count == ServiceSetting.all.count)
    }

    @Test func theConfigurationDocListsEverySettingWithItsFlagAndDefault() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let doc = try String(contentsOf: root.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        var rows: [String: [String]] = [:]
        for line in doc.split(separator: "\n") where line.hasPrefix("| `SYNCHEALTH_") {
            // An escaped `\|` inside a cell is not a column.
            let cells = line.replacingOccurrences(of: "\\|", with: "/").split(separator: "|", omittingEmptySubsequences: false)
                .map { $0.trimmingCharacters(in: .whitespaces) }
            rows[cells[1]] = Array(cells.dropFirst(1))
        }
        #expect(rows.count == ServiceSetting.all.count, "one row per setting")
        for setting in ServiceSetting.all {
            let row = try #require(rows["`\(setting.variable)`"], "\(setting.variable) has a row")
            #expect(row[1] == "`--\(setting.flag)`")
            #expect(row[3] == "`\(setting.defaultText)`" || row[3] == setting.defaultText, "\(setting.variable)'s default")
        }
    }

    @Test(arguments: [Duration.zero, .milliseconds(250), .seconds(90), .seconds(60), .seconds(7200), .seconds(86_400), .microseconds(1_500)])
    func aDurationIsWrittenSoThatItReadsBackAsItself(duration: Duration) {
        #expect(Duration(configuration: duration.configurationText) == duration)
    }
}
