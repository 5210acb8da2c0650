import CoreMetrics
public import Logging
public import ServiceLifecycle
public import SyncHealthCore
public import SyncHealthStore

/// Judges every app's releases (`ReleaseRegression`) and fires or resolves their `releaseRegression` alerts, with
/// the alerts' messages in the same transaction (`IncidentStore.saveReleaseAlerts`).
///
/// Every replica runs one. A release has at most one firing alert (the store refuses a second), so when two
/// replicas judge the same change one writes it, and the other's write is refused and it reads again.
public struct RegressionWatch: Service {
    let engine: any MonitorEngine
    let logger: Logger
    /// `synchealth_alerts_firing{kind="releaseRegression"}`: the engines count the other kinds.
    let firingGauge = Gauge(label: "synchealth_alerts_firing", dimensions: [("kind", AlertKind.releaseRegression.rawValue)])
    let fired = Counter(
        label: "synchealth_alert_transitions_total",
        dimensions: [("kind", AlertKind.releaseRegression.rawValue), ("change", "fire")]
    )
    let resolved = Counter(
        label: "synchealth_alert_transitions_total",
        dimensions: [("kind", AlertKind.releaseRegression.rawValue), ("change", "resolve")]
    )

    /// Watches `engine`'s releases.
    public init(engine: any MonitorEngine, logger: Logger) {
        self.engine = engine
        self.logger = logger
    }

    public func run() async throws {
        await engine.watch(every: engine.configuration.releaseCheckInterval, logger: logger, failure: "Judging releases failed") {
            // Refused (another replica wrote first): judge again in a second.
            try await step() == nil ? engine.now + .seconds(1) : nil
        }
    }

    /// One judgement of every release. Returns the alerts written, or `nil` when another replica wrote first (the
    /// caller judges again soon).
    @discardableResult
    func step() async throws -> [AlertRecord]? {
        let now = engine.now
        let apps = try await engine.appVersions()
        var findings: [ReleaseKey: ReleaseRegression.Finding] = [:]
        for (appId, releases) in apps {
            for (version, finding) in ReleaseRegression.evaluate(releases, minimumDevices: engine.configuration.alerts.releaseMinimumDevices) {
                findings[ReleaseKey(appId: appId, version: version)] = finding
            }
        }
        let firing = try await firingAlerts()
        let changes = ReleaseRegression.changes(firing: firing.mapValues(\.startsAt), findings: findings, now: now)
        firingGauge.record(firing.count)
        guard !changes.isEmpty else { return [] }
        var alerts: [AlertRecord] = []
        var messages: [OutboxMessage] = []
        for change in changes {
            let releases = apps[change.key.appId] ?? [:]
            let alert: AlertRecord
            if let finding = change.finding {
                alert = AlertText.record(regression: change.key, finding: finding, releases: releases, startsAt: change.transition.startsAt)
            } else if let fired = firing[change.key] {
                alert = AlertText.resolved(regression: fired, releases: releases, at: now)
            } else {
                continue
            }
            let context = AlertContext.release(change.key)
            alerts.append(alert)
            messages += OutboxBuilder.messages(
                for: alert,
                change: change.transition.change,
                line: .release(appId: change.key.appId, version: change.key.version),
                context: context,
                subscribers: engine.webhooks.subscribers(for: alert, context: context, now: now),
                now: now,
                publicURL: engine.configuration.publicURL
            )
        }
        do {
            try await engine.webhooks.store.saveReleaseAlerts(alerts, messages: messages)
        } catch IncidentStoreError.conflict {
            logger.debug("Release alerts changed meanwhile; judging again")
            return nil
        }
        let fires = changes.count { $0.finding != nil }
        fired.increment(by: fires)
        resolved.increment(by: changes.count - fires)
        firingGauge.record(firing.count + fires - (changes.count - fires))
        engine.feed.publish(alerts)
        for alert in alerts {
            logger.notice(
                "Release regression changed",
                metadata: [
                    "app.id": "\(alert.appId ?? "")", "release.version": "\(alert.appVersion ?? "")", "alert.state": "\(alert.state.rawValue)",
                ]
            )
        }
        if !messages.isEmpty { engine.webhooks.notify() }
        return alerts
    }

    /// The firing `releaseRegression` alerts, by release.
    func firingAlerts() async throws -> [ReleaseKey: AlertRecord] {
        var firing: [ReleaseKey: AlertRecord] = [:]
        var cursor: Int64?
        repeat {
            let page = try await engine.alerts(AlertQuery(state: .firing, kind: .releaseRegression, limit: 500, cursor: cursor))
            for alert in page.alerts {
                guard let appId = alert.appId, let version = alert.appVersion else { continue }
                firing[ReleaseKey(appId: appId, version: version)] = alert
            }
            cursor = page.nextCursor
        } while cursor != nil
        return firing
    }
}
