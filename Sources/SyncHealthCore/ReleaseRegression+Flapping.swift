/// Flapping of `releaseRegression` alerts, with the thresholds of device alerts: a release whose alert fires more
/// than `flapThreshold` times within `flapWindow` is flapping. Its alert is told once, as flapping, and then held:
/// it stays firing until the release has not been a regression for a whole window, so ops hear of one fire and one
/// resolve however often the release crosses the line meanwhile (as a flapping incident is held open).
///
/// Whether an alert fired flapping is a fact of the stored alerts (its release's fire times), the same on every
/// replica. Since when a held release has been quiet is what this replica saw at its judgements: a replica that
/// starts meanwhile waits a window from its own first look, so a hold can only last longer, never end early.
public struct ReleaseFlapping: Sendable, Equatable {
    /// The thresholds.
    public var configuration: NotificationPolicy.Configuration
    /// Since when each held release has not been a regression.
    public private(set) var quietSince: [ReleaseKey: Timestamp] = [:]

    /// Nothing held.
    public init(configuration: NotificationPolicy.Configuration) {
        self.configuration = configuration
    }

    /// Whether an alert that fires at `at` is flapping, given the times its release's alerts fired before.
    public func isFlapping(firesAt at: Timestamp, before fires: some Sequence<Timestamp>) -> Bool {
        let windowStart = at - configuration.flapWindow
        return fires.lazy.filter { $0 > windowStart && $0 < at }.count + 1 > configuration.flapThreshold
    }

    /// Of the firing alerts whose releases are no longer regressions, those that stay firing for now: the flapping
    /// ones quiet for less than a window. Call at every judgement, with every firing alert's release.
    ///
    /// - Parameters:
    ///   - flapping: the releases whose firing alert fired flapping (`isFlapping`).
    ///   - findings: the releases that are regressions now.
    /// - Returns: each held release, with when its hold ends if it stays quiet.
    public mutating func held(
        firing: Set<ReleaseKey>,
        flapping: Set<ReleaseKey>,
        findings: Set<ReleaseKey>,
        now: Timestamp
    ) -> [ReleaseKey: Timestamp] {
        var held: [ReleaseKey: Timestamp] = [:]
        for key in firing {
            guard flapping.contains(key), !findings.contains(key) else {
                quietSince[key] = nil
                continue
            }
            let since = quietSince[key] ?? now
            quietSince[key] = since
            if now < since + configuration.flapWindow { held[key] = since + configuration.flapWindow }
        }
        quietSince = quietSince.filter { firing.contains($0.key) }
        return held
    }
}
