public import SyncHealthCore
public import SyncHealthStore
import SyncHealthWebhooks
import Synchronization

/// Why a silence request was refused.
public enum SilenceError: Error, Sendable, Equatable {
    case invalid(pointer: String, detail: String)
}

/// The silences: their management, and the question every delivery asks ("is this alert silenced now?").
///
/// A silenced alert still fires, resolves and is listed; only its deliveries are held. When the silences holding an
/// alert end, it is delivered then if it still fires (`SilenceRelease`); one that resolved meanwhile never is
/// (`SilenceCover`).
public final class SilenceCenter: Sendable {
    let store: any SyncStore
    /// The service's clock.
    public let clock: any ServiceClock
    let reloadsBeforeUse: Bool
    let cache = Mutex<[String: Silence]>([:])
    /// Signalled when a silence is made or ends early (`DELETE`), so that the release looks at its end in time: the
    /// release sleeps until the next end it knows, and one made since may end sooner.
    let ended = WakeSignal()

    /// Creates the silences of `store`; `reloadsBeforeUse` when other replicas share it and may change them.
    public init(store: any SyncStore, clock: any ServiceClock, reloadsBeforeUse: Bool) {
        self.store = store
        self.clock = clock
        self.reloadsBeforeUse = reloadsBeforeUse
    }

    /// Reads every silence from the store, merged into what is known (`Silence.merged`): a read that began before
    /// this replica ended or released a silence does not bring the silence back.
    func load() async throws {
        let all = try await store.silences()
        cache.withLock { cache in
            for silence in all { cache[silence.id] = cache[silence.id].map { $0.merged(with: silence) } ?? silence }
        }
    }

    /// With a shared store another replica may have changed the silences: read them again.
    func refreshIfShared() async throws {
        if reloadsBeforeUse { try await load() }
    }

    /// The ids of the silences in force at `now` that match an alert of a device with `info`.
    public func silencedBy(_ alert: AlertRecord, info: DeviceInfo?, now: Timestamp) -> [String] {
        cache.withLock { $0.values.filter { $0.isActive(at: now) && $0.matchers.matches(alert, info: info) }.map(\.id).sorted() }
    }

    /// Whether a transition of `alert` is held back now, as `SilenceCover` tells it: a fire is held when a matching
    /// silence held it at its start (and, if that silence has ended since, until its release tells it); a resolve
    /// is told exactly when its fire was. Both are judged at the alert's start, not at `now`, so that a silence made
    /// between the two cannot hold a fire whose resolve it then lets through. Judged on `silences`, a snapshot
    /// (`Routing`), so that a group's plan takes no lock.
    static func holds(_ alert: AlertRecord, info: DeviceInfo?, now: Timestamp, in silences: [String: Silence]) -> Bool {
        let matching = silences.values.filter { $0.matchers.matches(alert, info: info) }
        switch SilenceCover.telling(firedAt: alert.startsAt, matching: matching, now: now) {
        case .atStart: return false
        case .held: return true
        case .release(let id, _): return silences[id]?.released != true
        }
    }

    /// Every silence known, as it stands (copy-on-write: no copy is made unless it changes).
    var current: [String: Silence] { cache.withLock { $0 } }

    /// Whether a silence in force now matches `alert`: what holds an incident's messages, which the incident book
    /// tries again at its next step.
    func inForce(_ alert: AlertRecord, info: DeviceInfo?, now: Timestamp) -> Bool {
        !silencedBy(alert, info: info, now: now).isEmpty
    }

    /// Whether the fire of `alert`, held at its start, is told by the release of `silence`.
    func releases(_ silence: Silence, _ alert: AlertRecord, info: DeviceInfo?, now: Timestamp) -> Bool {
        guard silence.matchers.matches(alert, info: info) else { return false }
        let matching = cache.withLock { $0.values.filter { $0.matchers.matches(alert, info: info) } }
        return SilenceCover.telling(firedAt: alert.startsAt, matching: matching, now: now) == .release(id: silence.id, at: silence.endsAt)
    }

    // MARK: Management

    /// Creates a silence: at least one matcher, an end after its start and after now.
    public func create(matchers: Silence.Matchers, startsAt: Timestamp?, endsAt: Timestamp, comment: String) async throws -> Silence {
        let now = clock.now
        let startsAt = startsAt ?? now
        guard !matchers.isEmpty else { throw SilenceError.invalid(pointer: "/matchers", detail: "give at least one matcher") }
        guard endsAt > startsAt, endsAt > now else {
            throw SilenceError.invalid(pointer: "/endsAt", detail: "endsAt must be after startsAt and after now")
        }
        guard comment.count <= 1024 else { throw SilenceError.invalid(pointer: "/comment", detail: "comment is longer than 1024 characters") }
        let silence = Silence(
            id: "si_" + RandomToken.make().prefix(22),
            matchers: matchers,
            startsAt: startsAt,
            endsAt: endsAt,
            comment: comment,
            createdAt: now
        )
        try await store.saveSilence(silence)
        cache.withLock { $0[silence.id] = silence }
        ended.signal()
        return silence
    }

    /// Every silence, expired ones included, newest first.
    public func list() async throws -> [Silence] {
        try await refreshIfShared()
        return cache.withLock { $0.values.sorted { ($0.createdAt, $0.id) > ($1.createdAt, $1.id) } }
    }

    /// One silence.
    public func get(_ id: String) async throws -> Silence? {
        try await refreshIfShared()
        return cache.withLock { $0[id] }
    }

    /// Ends a silence now (kept, as expired). Returns it, or `nil` if there is none with this id.
    public func expire(_ id: String) async throws -> Silence? {
        guard var silence = try await get(id) else { return nil }
        let now = clock.now
        if silence.endsAt > now {
            silence.endsAt = max(now, silence.startsAt)
            try await store.saveSilence(silence)
            cache.withLock { $0[id] = silence }
            ended.signal()
        }
        return silence
    }

    // MARK: Release

    /// Silences that have ended and whose held deliveries are not released yet.
    func endedUnreleased(now: Timestamp) async throws -> [Silence] {
        try await refreshIfShared()
        return cache.withLock { $0.values.filter { $0.endsAt <= now && !$0.released }.sorted { $0.endsAt < $1.endsAt } }
    }

    /// When the next unreleased silence ends.
    func nextEnd() -> Timestamp? {
        cache.withLock { $0.values.filter { !$0.released }.map(\.endsAt).min() }
    }

    func markReleased(_ silence: Silence) async throws {
        var released = silence
        released.released = true
        try await store.saveSilence(released)
        cache.withLock { $0[silence.id] = released }
    }
}
