import SyncHealthCore
import SyncHealthStore

/// The subscriptions and the silences as they stood when a group began to be planned. Planning reads this value, so
/// that it takes neither center's lock inside the cache's (a lock nested in another is an order to keep everywhere).
/// Copy-on-write: taking it copies two dictionary references.
struct Routing: Sendable {
    let subscriptions: [String: WebhookSubscription]
    let silences: [String: Silence]
    /// The group's time: what silences are judged at.
    let now: Timestamp

    /// The subscriptions that hear of `alert`'s transition (`WebhookCenter.routed`); none while a silence holds it
    /// (`SilenceCenter.holds`).
    func subscribers(for alert: AlertRecord, context: AlertContext) -> [WebhookSubscription] {
        guard !SilenceCenter.holds(alert, info: context.info, now: now, in: silences) else { return [] }
        return WebhookCenter.routed(alert, context: context, in: subscriptions)
    }
}
