import CoreMetrics
public import Logging
public import ServiceLifecycle
import SyncHealthCore
public import SyncHealthStore
import Synchronization

/// Judges every app's releases (`ReleaseRegression`) and fires or resolves their `releaseRegression` alerts, with
/// the alerts' messages in the same transaction (`IncidentStore.saveReleaseAlerts`).
///
/// Every replica runs one. A release has at most one firing alert (the store refuses a second), so when two
/// replicas judge the same change one writes it, and the other's write is refused and it reads again. A release
/// whose alert flaps is told once as flapping and held firing until it has been quiet for a window
/// (`ReleaseFlapping`).
public final class RegressionWatch: Service, Sendable {
    let engine: any EngineReads
    /// The silences and subscriptions a release's alert is told to, and the sender woken when messages are written.
    let delivery: Delivery
    /// Where release alerts and their messages are written.
    let store: any SyncStore
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
    /// The releases held firing while they flap.
    let flapping: Mutex<ReleaseFlapping>

    /// Watches `engine`'s releases, in the engine's store.
    public convenience init(engine: any EngineReads, delivery: Delivery, logger: Logger) {
        self.init(engine: engine, delivery: delivery, store: engine.syncStore, logger: logger)
    }

    /// Watches `engine`'s releases, writing their alerts to `store`.
    public init(engine: any EngineReads, delivery: Delivery, store: any SyncStore, logger: Logger) {
        self.engine = engine
        self.delivery = delivery
        self.store = store
        self.logger = logger
        self.flapping = Mutex(ReleaseFlapping(configuration: engine.configuration.notifications))
    }

    public func run() async throws {
        await engine.watch(every: engine.configuration.releaseCheckInterval, logger: logger, failure: "Judging releases failed") {
            // Refused (another replica wrote first): judge again in a second.
            try await self.step() == nil ? self.engine.now + .seconds(1) : nil
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
        try await delivery.silences.refreshIfShared()
        let (held, fires) = try await holds(firing: firing, findings: findings, now: now)
        let changes = ReleaseRegression.changes(firing: firing.filter { !held.contains($0.key) }.mapValues(\.startsAt), findings: findings, now: now)
        firingGauge.record(firing.count)
        guard !changes.isEmpty else { return [] }
        var alerts: [AlertRecord] = []
        var messages: [OutboxMessage] = []
        let routing = delivery.routing(now: now)
        for change in changes {
            let releases = apps[change.key.appId] ?? [:]
            let alert: AlertRecord
            if let finding = change.finding {
                let record = AlertText.record(regression: change.key, finding: finding, releases: releases, startsAt: change.transition.startsAt)
                let flaps = flapping.withLock { $0.isFlapping(firesAt: now, before: fires[change.key] ?? []) }
                alert = flaps ? AlertText.flapping(regression: record, configuration: engine.configuration.notifications) : record
            } else if let fired = firing[change.key] {
                // A held alert resolves as of when its release went quiet.
                let endsAt = flapping.withLock { $0.quietSince[change.key] } ?? now
                alert = AlertText.resolved(regression: fired, releases: releases, at: endsAt)
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
                subscribers: routing.subscribers(for: alert, context: context),
                now: now,
                publicURL: engine.configuration.publicURL
            )
        }
        do {
            try await store.saveReleaseAlerts(alerts, messages: messages)
        } catch IncidentStoreError.conflict {
            logger.debug("Release alerts changed meanwhile; judging again")
            return nil
        }
        let fireCount = changes.count { $0.finding != nil }
        fired.increment(by: fireCount)
        resolved.increment(by: changes.count - fireCount)
        firingGauge.record(firing.count + fireCount - (changes.count - fireCount))
        engine.feed.publish(alerts)
        for alert in alerts {
            logger.notice(
                "Release regression changed",
                metadata: [
                    "app.id": "\(alert.appId ?? "")", "release.version": "\(alert.appVersion ?? "")", "alert.state": "\(alert.state.rawValue)",
                ]
            )
        }
        if !messages.isEmpty { delivery.outbox.notify() }
        return alerts
    }

    /// The firing alerts held while they flap, and the fire times the decision read (only read when an alert is to
    /// fire or resolve).
    func holds(
        firing: [ReleaseKey: AlertRecord],
        findings: [ReleaseKey: ReleaseRegression.Finding],
        now: Timestamp
    ) async throws -> (held: Set<ReleaseKey>, fires: [ReleaseKey: [Timestamp]]) {
        let resolving = firing.filter { findings[$0.key] == nil }
        var fires: [ReleaseKey: [Timestamp]] = [:]
        if !resolving.isEmpty || findings.keys.contains(where: { firing[$0] == nil }) {
            let earliest = resolving.values.map(\.startsAt).min().map { min($0, now) } ?? now
            fires = try await fireTimes(since: earliest - engine.configuration.notifications.flapWindow)
        }
        let held = flapping.withLock { state in
            let flaps = resolving.filter { state.isFlapping(firesAt: $0.value.startsAt, before: fires[$0.key] ?? []) }
            return state.held(firing: Set(firing.keys), flapping: Set(flaps.keys), findings: Set(findings.keys), now: now)
        }
        return (Set(held.keys), fires)
    }

    /// When each release's `releaseRegression` alerts fired, for those that fired since `since`. Pages are read newest
    /// first until one holds none of them (a release alert is written when it fires).
    func fireTimes(since: Timestamp) async throws -> [ReleaseKey: [Timestamp]] {
        var fires: [ReleaseKey: [Timestamp]] = [:]
        var cursor: Int64?
        repeat {
            let page = try await engine.alerts(AlertQuery(kind: .releaseRegression, limit: 500, cursor: cursor))
            let recent = page.alerts.filter { $0.startsAt >= since }
            for alert in recent {
                guard let appId = alert.appId, let version = alert.appVersion else { continue }
                fires[ReleaseKey(appId: appId, version: version), default: []].append(alert.startsAt)
            }
            cursor = recent.isEmpty ? nil : page.nextCursor
        } while cursor != nil
        return fires
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
