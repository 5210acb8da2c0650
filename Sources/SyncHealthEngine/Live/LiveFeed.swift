import DequeModule
public import SyncHealthCore
public import SyncHealthStore
import Synchronization

/// What live views receive: alert transitions as they are committed, and fleet-summary changes.
///
/// Each alert transition has a durable id (`transitionId`: its alert's id and whether it fired or resolved), the
/// same on every replica and after a restart. The last `replayCapacity` are kept, in the order they were
/// committed, so that a reader that reconnects with the id of the last one it saw (`Last-Event-ID`), to this
/// replica or another, after a restart or not, gets exactly the ones it missed, none twice. The engine fills the
/// buffer from the store at start (`rebuild`). When the id is not kept (more transitions happened since than are
/// kept), the reader receives `.reset` (reload from `GET /v1/alerts`) instead of a silent gap. A transition
/// published twice (a replica that hears of it from the database and from its own commit) is kept once.
///
/// During a storm, transitions are coalesced: each reader receives at most `alertBudget` of them a tick (the ticker
/// ticks once a second). Past it, the reader gets no more transitions, only the summaries; once a tick has seen no
/// more than `alertBudget` transitions published, it gets `.reset` (reload from `GET /v1/alerts`) and follows live
/// again. So a storm costs each open page a bounded rate, and a page converges within two ticks of its end.
///
/// Each subscriber has a bounded buffer. A reader that falls behind by more than `bufferLimit` messages (of at
/// most 100 alerts each) is cut off (`onOverflow`, then its stream ends) rather than buffered without bound.
public final class LiveFeed: Sendable {
    /// What a message says.
    public enum Content: Sendable {
        /// Alerts that fired or resolved in one commit, in order; each `id` resumes after its alert.
        case alerts([(id: String, alert: AlertRecord)])
        /// Scopes whose counters changed.
        case summaries([(scope: FleetScope, counts: FleetCounts)])
        /// Nothing happened for a while; keeps proxies from closing an idle connection.
        case keepalive
        /// The reader's `Last-Event-ID` cannot be resumed from: transitions may have been missed.
        case reset
    }

    /// One message, shared by every subscriber: its wire form is made once, by the first writer that asks.
    public final class Message: Sendable {
        /// What it says.
        public let content: Content
        private let wire = Mutex<[UInt8]?>(nil)

        init(_ content: Content) { self.content = content }

        /// The message's bytes: `encode`'s result, computed on the first call and reused.
        public func encoded(_ encode: (Content) throws -> [UInt8]) rethrows -> [UInt8] {
            if let bytes = wire.withLock({ $0 }) { return bytes }
            let bytes = try encode(content)
            wire.withLock { $0 = bytes }
            return bytes
        }
    }

    /// A subscription: its messages, and how to end it.
    public struct Subscription: Sendable {
        /// The messages, starting with the replay.
        public let messages: AsyncStream<Message>
        let id: Int
        let feed: LiveFeed

        /// Ends the subscription (the stream finishes).
        public func cancel() { feed.remove(id) }
    }

    struct Subscriber {
        var id: Int
        var continuation: AsyncStream<Message>.Continuation
        var onOverflow: @Sendable () -> Void
        /// Transitions sent since the last tick.
        var sent = 0
        /// Over its budget: sent summaries only, until a quiet tick sends it `.reset`.
        var coalescing = false
    }

    struct State {
        var nextSequence: Int64 = 1
        var recent: Deque<(sequence: Int64, id: String, alert: AlertRecord)> = []
        /// The sequence of each kept transition, by id.
        var positions: [String: Int64] = [:]
        var subscribers: [Int: Subscriber] = [:]
        var nextSubscriber = 0
        var summaries: [FleetScope: FleetCounts] = [:]
        var finished = false
        /// Transitions published since the last tick.
        var published = 0
        /// Calls of `rebuild` so far.
        var rebuilds = 0
    }

    /// Most alerts in one message.
    static let alertsPerMessage = 100
    /// Transitions kept for readers that reconnect.
    public let replayCapacity: Int
    /// Messages a subscriber may fall behind by before it is cut off.
    public let bufferLimit: Int
    /// Transitions a subscriber receives a tick before it is coalesced.
    public let alertBudget: Int
    private let state = Mutex(State())

    /// Creates a feed.
    public init(replayCapacity: Int = 10_000, bufferLimit: Int = 256, alertBudget: Int = 200) {
        self.replayCapacity = max(1, replayCapacity)
        self.bufferLimit = max(1, bufferLimit)
        self.alertBudget = max(1, alertBudget)
    }

    /// A transition's id: its alert's id, then `.f` for the fire or `.r` for the resolve. An alert fires once and
    /// resolves once (its id names its start), so the id is the same wherever and whenever it is computed.
    public static func transitionId(_ alert: AlertRecord) -> String {
        alert.id + (alert.state == .firing ? ".f" : ".r")
    }

    /// The number of open subscriptions.
    public var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// How many times the buffer was rebuilt from the store (at start, and after a replica lost its connection).
    public var rebuilds: Int { state.withLock { $0.rebuilds } }

    /// Subscribes. With the id of the last alert message a reader saw, the transitions after it are replayed
    /// first (or `.reset` when that is impossible); then live messages. `onOverflow` runs once if the reader falls
    /// too far behind. Summaries are sent as they change: a reader reads the current ones itself after subscribing
    /// (what changes meanwhile comes as a later message).
    public func subscribe(lastEventId: String?, onOverflow: @escaping @Sendable () -> Void = {}) -> Subscription {
        let (stream, id) = state.withLock { s -> (AsyncStream<Message>, Int) in
            var initial: [Message] = []
            if let lastEventId {
                // A replay longer than a tick's budget is a storm missed: reload instead.
                if let replay = Self.replay(after: lastEventId, state: s), replay.count <= alertBudget {
                    initial += Self.messages(replay.map { ($0.id, $0.alert) })
                } else {
                    initial.append(Message(.reset))
                }
            }
            // Room for the initial messages, and `bufferLimit` more.
            let (stream, continuation) = AsyncStream.makeStream(of: Message.self, bufferingPolicy: .bufferingOldest(bufferLimit + initial.count))
            for message in initial { continuation.yield(message) }
            let id = s.nextSubscriber
            s.nextSubscriber += 1
            if s.finished {
                continuation.finish()
            } else {
                s.subscribers[id] = Subscriber(id: id, continuation: continuation, onOverflow: onOverflow)
                continuation.onTermination = { [weak self] _ in self?.remove(id) }
            }
            return (stream, id)
        }
        return Subscription(messages: stream, id: id, feed: self)
    }

    /// Transitions after `lastEventId`, or `nil` when it is not kept (too old, or unknown).
    static func replay(after lastEventId: String, state: State) -> [(sequence: Int64, id: String, alert: AlertRecord)]? {
        guard let last = state.positions[lastEventId] else { return nil }
        return state.recent.filter { $0.sequence > last }
    }

    /// Appends transitions not kept yet, evicting the oldest past `replayCapacity`; returns those appended.
    private func append(_ alerts: [AlertRecord], to s: inout State) -> [(id: String, alert: AlertRecord)] {
        var appended: [(id: String, alert: AlertRecord)] = []
        for alert in alerts {
            let id = Self.transitionId(alert)
            guard s.positions[id] == nil else { continue }
            let sequence = s.nextSequence
            s.nextSequence += 1
            s.recent.append((sequence, id, alert))
            s.positions[id] = sequence
            if s.recent.count > replayCapacity, let evicted = s.recent.popFirst() { s.positions[evicted.id] = nil }
            appended.append((id, alert))
        }
        return appended
    }

    /// Numbered transitions as messages: a commit's in one (a reader writes it at once), a burst (a storm of timers
    /// firing together) cut into messages of at most `alertsPerMessage`, so that the buffer bound, counted in
    /// messages, also bounds the bytes a slow reader holds.
    static func messages(_ numbered: [(id: String, alert: AlertRecord)]) -> [Message] {
        stride(from: 0, to: numbered.count, by: alertsPerMessage).map {
            Message(.alerts(Array(numbered[$0..<min($0 + alertsPerMessage, numbered.count)])))
        }
    }

    /// Publishes the alert transitions of one commit, in order; one already kept is not published again.
    public func publish(_ alerts: [AlertRecord]) {
        state.withLock { s -> [Subscriber] in
            let numbered = append(alerts, to: &s)
            guard !numbered.isEmpty else { return [] }
            s.published += numbered.count
            let messages = Self.messages(numbered)
            return Self.send(messages, in: &s) { subscriber in
                guard !subscriber.coalescing else { return false }
                subscriber.sent += numbered.count
                subscriber.coalescing = subscriber.sent > alertBudget
                return !subscriber.coalescing
            }
        }.forEach(Self.cutOff)
    }

    /// Starts a new tick: readers coalesced during the last one get `.reset` if it published no more than a
    /// reader's budget (the storm is over), and every reader's budget is renewed. The ticker calls it once a second.
    public func tick() {
        state.withLock { s -> [Subscriber] in
            let calm = s.published <= alertBudget
            s.published = 0
            var resets: [Int] = []
            for id in Array(s.subscribers.keys) {
                s.subscribers[id]?.sent = 0
                if calm, s.subscribers[id]?.coalescing == true {
                    s.subscribers[id]?.coalescing = false
                    resets.append(id)
                }
            }
            return Self.send([Message(.reset)], in: &s) { subscriber in resets.contains(subscriber.id) }
        }.forEach(Self.cutOff)
    }

    /// Publishes, as one message, the scopes whose counters differ from the last call (scopes that emptied are sent
    /// as zero).
    public func publishSummaries(_ current: [FleetScope: FleetCounts]) {
        state.withLock { s -> [Subscriber] in
            var changed: [(scope: FleetScope, counts: FleetCounts)] = []
            for (scope, counts) in current where s.summaries[scope] != counts { changed.append((scope, counts)) }
            for scope in s.summaries.keys where current[scope] == nil { changed.append((scope, FleetCounts())) }
            s.summaries = current
            return changed.isEmpty ? [] : Self.send([Message(.summaries(changed))], in: &s)
        }.forEach(Self.cutOff)
    }

    /// After devices were erased: their transitions leave the replay buffer, and every reader gets `.reset`, so
    /// that a page drops the rows it shows of them.
    public func erased(_ keys: Set<DeviceKey>) {
        guard !keys.isEmpty else { return }
        remove { alert in alert.deviceKey.map { keys.contains($0) } ?? false }
    }

    /// After alerts were deleted on a shared store: their transitions leave the replay buffer, and readers get
    /// `.reset` if any was kept or `resetAlways` (a firing alert erased, which pages show whatever its age). History
    /// past its retention is deleted too, and resets no one.
    public func deleted(alertIds: Set<String>, resetAlways: Bool) {
        guard !alertIds.isEmpty else { return }
        remove(resetAlways: resetAlways) { alertIds.contains($0.id) }
    }

    private func remove(resetAlways: Bool = true, where matches: (AlertRecord) -> Bool) {
        state.withLock { s -> [Subscriber] in
            var gone: [String] = []
            s.recent.removeAll { entry in
                guard matches(entry.alert) else { return false }
                gone.append(entry.id)
                return true
            }
            for id in gone { s.positions[id] = nil }
            return gone.isEmpty && !resetAlways ? [] : Self.send([Message(.reset)], in: &s)
        }.forEach(Self.cutOff)
    }

    /// Replaces what is kept by `recent` (the store's last transitions, oldest first), and tells every reader
    /// `.reset`: at start, before anyone reads, and when transitions may have been missed (a replica that lost its
    /// connection to the database and heard nothing meanwhile).
    public func rebuild(recent: [AlertRecord]) {
        state.withLock { s -> [Subscriber] in
            s.recent = []
            s.positions = [:]
            s.rebuilds += 1
            _ = append(Array(recent.suffix(replayCapacity)), to: &s)
            return Self.send([Message(.reset)], in: &s)
        }.forEach(Self.cutOff)
    }

    /// Sends a keepalive to every subscriber.
    public func keepalive() {
        state.withLock { Self.send([Message(.keepalive)], in: &$0) }.forEach(Self.cutOff)
    }

    /// Ends every subscription, and any made later (the service is stopping).
    public func finishAll() {
        let ended = state.withLock { s -> [Subscriber] in
            s.finished = true
            defer { s.subscribers = [:] }
            return Array(s.subscribers.values)
        }
        for subscriber in ended { subscriber.continuation.finish() }
    }

    /// Yields `messages` to every subscriber that `include` accepts (it may update the subscriber); returns (and
    /// unregisters) those whose buffer is full. They are cut off outside the lock, since ending a stream runs its
    /// termination handler.
    private static func send(
        _ messages: [Message],
        in s: inout State,
        include: (inout Subscriber) -> Bool = { _ in true }
    ) -> [Subscriber] {
        guard !messages.isEmpty else { return [] }
        var overflowed: [Int] = []
        for id in Array(s.subscribers.keys) {
            guard var subscriber = s.subscribers[id] else { continue }
            let included = include(&subscriber)
            s.subscribers[id] = subscriber
            guard included else { continue }
            for message in messages {
                if case .dropped = subscriber.continuation.yield(message) {
                    overflowed.append(id)
                    break
                }
            }
        }
        return overflowed.compactMap { s.subscribers.removeValue(forKey: $0) }
    }

    private static func cutOff(_ subscriber: Subscriber) {
        subscriber.onOverflow()
        subscriber.continuation.finish()
    }

    func remove(_ id: Int) {
        let removed = state.withLock { $0.subscribers.removeValue(forKey: id) }
        removed?.continuation.finish()
    }
}
