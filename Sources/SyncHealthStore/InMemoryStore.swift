public import SyncHealthCore
import Synchronization

/// A store that keeps everything in memory, for tests. Not durable.
public final class InMemoryStore: LocalSyncStore {
    struct State {
        var devices: [DeviceKey: DeviceRecord] = [:]
        var order: [DeviceKey] = []
        var seen: [DeviceKey: [String: Timestamp]] = [:]
        var alerts: [AlertRecord] = []
        var alertIndex: [String: Int] = [:]
        var fleetAlerts: [String: Timestamp] = [:]
        var webhooks: [String: WebhookSubscription] = [:]
        var silences: [String: Silence] = [:]
        var history: [HistoryResolution: [HistoryKey: FleetCounts]] = [:]
        var outbox: [OutboxMessage] = []
        var deliveries: [DeliveryAttempt] = []
        /// Incidents in the order they were opened.
        var incidents: [IncidentRecord] = []
        var keys: [StoredKey] = []
        /// Each key's last change, and the last change made.
        var keyChangeSeq: [String: Int64] = [:]
        var lastKeyChange: Int64 = 0
        var audit: [AuditEntry] = []
        var challenges: [[UInt8]: (appId: String, expiresAt: Timestamp)] = [:]
        var attestations: [DeviceAttestation] = []
        var tokenSecrets: [DeviceTokenSecret] = []
        var revocations: [AttestationRevocation] = []
        /// The app version of each attested device's last signed upload.
        var attestedVersions: [DeviceKey: String] = [:]
    }

    private let state = Mutex(State())

    /// Runs `body` on the state under its lock (for the extensions in other files).
    func withState<T, E: Error>(_ body: (inout State) throws(E) -> T) throws(E) -> T { try state.withLock { s throws(E) in try body(&s) } }
    /// When set, the next commit fails with this error (fault injection for tests).
    private let injectedCommitFailure = Mutex<(any Error & Sendable)?>(nil)

    /// An empty store.
    public init() {}

    /// Makes the next `commit` throw `error` without writing anything. A test hook: `@_spi(Testing) import
    /// SyncHealthStore` to reach it, so that it is no part of the store's API.
    @_spi(Testing) public func failNextCommit(with error: any Error & Sendable) {
        injectedCommitFailure.withLock { $0 = error }
    }

    public func loadState() async throws -> PersistedState {
        state.withLock { s in
            PersistedState(devices: s.order.compactMap { s.devices[$0] }, fleetAlerts: s.fleetAlerts)
        }
    }

    func seen(_ requests: [EventIdClaim]) -> [Set<String>] {
        state.withLock { s in
            requests.map { request in
                let seen = s.seen[request.key] ?? [:]
                return Set(request.eventIds.filter { seen[$0] != nil })
            }
        }
    }

    /// Runs `body` on the calling task: a commit here is a lock held for a moment.
    public func commitSeries<T: Sendable>(_ body: @escaping @Sendable (any GroupCommitter) throws -> T) async throws -> T {
        let committer = InMemoryCommitter(store: self)
        defer { committer.finish() }
        return try body(committer)
    }

    func write(_ changes: StoreChanges) throws {
        if let error = injectedCommitFailure.withLock({ e -> (any Error & Sendable)? in
            defer { e = nil }
            return e
        }) {
            throw error
        }
        state.withLock { s in
            for record in changes.devices {
                if s.devices.updateValue(record, forKey: record.key) == nil { s.order.append(record.key) }
            }
            for (key, eventId) in changes.eventIds {
                s.seen[key, default: [:]][eventId] = changes.recordedAt
            }
            for alert in changes.alerts {
                if let index = s.alertIndex[alert.id] {
                    s.alerts[index] = alert
                } else {
                    s.alertIndex[alert.id] = s.alerts.count
                    s.alerts.append(alert)
                }
            }
            for (container, startsAt) in changes.fleetAlerts {
                s.fleetAlerts[container] = startsAt
            }
            for message in changes.outbox where !s.outbox.contains(where: { $0.id == message.id }) {
                s.outbox.append(message)
            }
            for removal in changes.removals { s.remove(removal) }
        }
    }

    public func alerts(_ query: AlertQuery) async throws -> AlertPage {
        state.withLock { s in
            var result: [AlertRecord] = []
            var index = Int(min(query.cursor ?? Int64(s.alerts.count), Int64(s.alerts.count))) - 1
            while index >= 0, result.count < query.limit {
                let alert = s.alerts[index]
                if query.matches(alert) { result.append(alert) }
                index -= 1
            }
            // `index + 1` is the first position not yet looked at, counting down.
            let more = index >= 0 && s.alerts[0...index].contains(where: query.matches)
            return AlertPage(alerts: result, nextCursor: more ? Int64(index + 1) : nil)
        }
    }

    public func recentTransitions(limit: Int) async throws -> [AlertRecord] {
        state.withLock { AlertTransitions.recent($0.alerts, limit: limit) }
    }

    public func pruneEventIds(recordedBefore cutoff: Timestamp, limit: Int) async throws -> Int {
        state.withLock { s in
            var removed = 0
            for key in s.seen.keys where removed < limit {
                guard var ids = s.seen[key] else { continue }
                for (id, recordedAt) in ids where recordedAt < cutoff && removed < limit {
                    ids[id] = nil
                    removed += 1
                }
                s.seen[key] = ids
            }
            return removed
        }
    }

    public func pruneHistory(before cutoff: Timestamp, limit: Int) async throws -> Int {
        state.withLock { s in
            var removed = 0
            let alerts = s.alerts.indices.filter { i in s.alerts[i].state == .resolved && s.alerts[i].endsAt.map { $0 < cutoff } ?? false }
                .prefix(limit)
            let gone = Set(alerts.map { s.alerts[$0].id })
            s.removeAlerts { gone.contains($0.id) }
            removed += gone.count
            let attempts = s.deliveries.prefix(limit - removed).prefix { $0.attemptedAt < cutoff }.count
            s.deliveries.removeFirst(attempts)
            removed += attempts
            let incidents = s.incidents.indices.filter { i in
                s.incidents[i].state == .resolved && s.incidents[i].resolvedAt.map { $0 < cutoff } ?? false
            }
            .prefix(limit - removed)
            let closed = Set(incidents)
            s.incidents = s.incidents.enumerated().filter { !closed.contains($0.offset) }.map(\.element)
            return removed + closed.count
        }
    }

    public func close() async throws {}

    public func silences() async throws -> [Silence] {
        state.withLock { $0.silences.values.sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) } }
    }

    public func saveSilence(_ silence: Silence) async throws {
        state.withLock { $0.silences[silence.id] = $0.silences[silence.id].map { $0.merged(with: silence) } ?? silence }
    }

    public func enqueue(_ messages: [OutboxMessage]) async throws {
        state.withLock { s in
            for m in messages where !s.outbox.contains(where: { $0.id == m.id }) { s.outbox.append(m) }
        }
    }

    public func webhooks() async throws -> [WebhookSubscription] {
        state.withLock { $0.webhooks.values.sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) } }
    }

    public func saveWebhook(_ webhook: WebhookSubscription) async throws {
        state.withLock { $0.webhooks[webhook.id] = webhook }
    }

    public func deleteWebhook(id: String) async throws -> Bool {
        state.withLock { s in
            s.outbox.removeAll { $0.webhookId == id }
            s.deliveries.removeAll { $0.webhookId == id }
            return s.webhooks.removeValue(forKey: id) != nil
        }
    }

    public func dueMessages(now: Timestamp, limit: Int) async throws -> [OutboxMessage] {
        state.withLock { s in
            // A line is one webhook's messages of one ordering key.
            struct Line: Hashable { var webhookId: String, orderingKey: OutboxLine }
            var firstInLine = Set<Line>()
            var due: [OutboxMessage] = []
            for m in s.outbox {
                guard firstInLine.insert(Line(webhookId: m.webhookId, orderingKey: m.orderingKey)).inserted else { continue }
                if m.state == .pending && m.nextAttemptAt <= now && due.count < limit { due.append(m) }
            }
            return due
        }
    }

    public func nextDueTime() async throws -> Timestamp? {
        state.withLock { $0.outbox.filter { $0.state == .pending }.map(\.nextAttemptAt).min() }
    }

    public func recordAttempt(_ attempt: DeliveryAttempt, disable reason: String?) async throws {
        state.withLock { s in
            var a = attempt
            a.seq = Int64(s.deliveries.count + 1)
            s.deliveries.append(a)
            if let i = s.outbox.firstIndex(where: { $0.id == a.messageId }) {
                switch a.outcome {
                case .delivered: s.outbox.remove(at: i)
                case .retrying:
                    s.outbox[i].attempts = a.attempt
                    s.outbox[i].nextAttemptAt = a.nextRetryAt ?? a.attemptedAt
                case .failed, .disabled:
                    s.outbox[i].attempts = a.attempt
                    s.outbox[i].state = .failed
                }
            }
            if let reason { s.webhooks[a.webhookId]?.disabledReason = reason }
        }
    }

    public func deliveries(webhookId: String, limit: Int, before cursor: Int64?) async throws -> (attempts: [DeliveryAttempt], nextCursor: Int64?) {
        state.withLock { s in
            let matching = s.deliveries.reversed().filter { $0.webhookId == webhookId && $0.seq < (cursor ?? .max) }
            let page = Array(matching.prefix(limit))
            return (page, matching.count > limit ? page.last?.seq : nil)
        }
    }

    public func resend(webhookId: String, messageId: String, now: Timestamp) async throws -> Bool {
        state.withLock { s in
            guard let i = s.outbox.firstIndex(where: { $0.id == messageId && $0.webhookId == webhookId && $0.state == .failed }) else { return false }
            s.outbox[i].state = .pending
            s.outbox[i].attempts = 0
            s.outbox[i].nextAttemptAt = now
            return true
        }
    }
}

extension InMemoryStore.State {
    /// Removes the alerts `matches` picks, and renumbers the rest.
    mutating func removeAlerts(where matches: (AlertRecord) -> Bool) {
        alerts.removeAll(where: matches)
        alertIndex = Dictionary(uniqueKeysWithValues: alerts.enumerated().map { ($1.id, $0) })
    }

    /// Takes a device out (`DeviceRemoval`).
    mutating func remove(_ removal: DeviceRemoval) {
        let key = removal.key
        guard devices.removeValue(forKey: key) != nil else { return }
        order.removeAll { $0 == key }
        switch removal.reason {
        case .forgotten:
            // Its ids aged out long ago, unless the retention is shorter than the dedupe window: they stay to age out.
            break
        case .erased:
            seen[key] = nil
            removeAlerts { $0.appId == key.appId && $0.deviceId == key.deviceId }
            let keys = Set(removal.orderingKeys)
            outbox.removeAll { keys.contains($0.orderingKey) }
        }
    }
}

extension AlertQuery {
    /// Whether an alert passes the filters (not the page position).
    public func matches(_ alert: AlertRecord) -> Bool {
        (state == nil || alert.state == state) && (kind == nil || alert.kind == kind)
            && (appId == nil || alert.appId == appId) && (deviceId == nil || alert.deviceId == deviceId)
    }
}

/// Commits the groups of a series in memory (`InMemoryStore.commitSeries`): `judge` reads the ids seen, `append`
/// writes the changes with the new ones.
final class InMemoryCommitter: GroupCommitter {
    let store: InMemoryStore
    /// The open group's claims and what `judge` found of them.
    private var group = OpenGroup<(claims: [EventIdClaim], seen: [Set<String>])>()

    init(store: InMemoryStore) { self.store = store }

    func judge(_ claims: [EventIdClaim]) throws -> [Set<String>] {
        group.expectNoneOpen()
        let seen = store.seen(claims)
        group.open((claims, seen))
        return seen
    }

    func append(_ changes: StoreChanges, at recordedAt: Timestamp) throws {
        let judged = group.close()
        var changes = changes
        changes.eventIds = StoreChanges.newIds(judged.claims, seen: judged.seen)
        changes.recordedAt = recordedAt
        try store.write(changes)
    }

    func finish() { group.finish() }

    func abandon() { group.abandon() }

    var wantsBreak: Bool { false }
}
