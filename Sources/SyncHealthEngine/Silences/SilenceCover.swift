public import SyncHealthCore
public import SyncHealthStore

/// When silences let an alert's fire be told, from the silences alone: no state of its own, so every replica, and a
/// restarted service, reads the same answer.
///
/// A silence holds a fire at `t` when it was in force at `t` and already made (`max(startsAt, createdAt) <= t <
/// endsAt`: one made later with a start in the past did not hold what was told before). A fire held at its start is
/// told at the first moment after it that no matching silence holds, by the release of the silence ending then
/// (`SilenceRelease`), if the alert still fires. Its resolve is told exactly when its fire was, silences or not: a
/// receiver told of a fire (a PagerDuty incident, an Alertmanager alert) hears that it ended, and one never told of
/// it hears nothing.
public enum SilenceCover {
    /// How a fire is told.
    public enum Telling: Sendable, Equatable {
        /// At its start: no silence held it.
        case atStart
        /// Not yet: a silence holds it now.
        case held
        /// When silence `id` ended, at `at`, by that silence's release.
        case release(id: String, at: Timestamp)
    }

    /// How the fire at `start` is told, given the silences that match its alert (in any state).
    public static func telling(firedAt start: Timestamp, matching: [Silence], now: Timestamp) -> Telling {
        var t = start
        var releaser: Silence?
        while true {
            let holding = matching.filter { max($0.startsAt, $0.createdAt) <= t && t < $0.endsAt }
            // The one ending last releases; of those ending together, the first by id, so that one release tells it.
            guard let last = holding.min(by: { ($1.endsAt, $0.id) < ($0.endsAt, $1.id) }) else { break }
            releaser = last
            t = last.endsAt
        }
        guard let releaser else { return .atStart }
        return t > now ? .held : .release(id: releaser.id, at: t)
    }
}
