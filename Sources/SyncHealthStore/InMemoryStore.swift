import Synchronization
import SyncHealthCore

/// A store that keeps everything in memory, for tests. Not durable.
public final class InMemoryStore: SyncStore {
    struct State {
        var devices: [DeviceKey: DeviceRecord] = [:]
        var order: [DeviceKey] = []
        var seen: [DeviceKey: [String: Timestamp]] = [:]
        var alerts: [AlertRecord] = []
        var alertIndex: [String: Int] = [:]
        var fleetAlerts: [String: Timestamp] = [:]
    }

    private let state = Mutex(State())
    /// When set, the next commit fails with this error (fault injection for tests).
    private let failNextCommit = Mutex<(any Error & Sendable)?>(nil)

    /// An empty store.
    public init() {}

    /// Makes the next `commit` throw `error` without writing anything.
    public func failNextCommit(with error: any Error & Sendable) {
        failNextCommit.withLock { $0 = error }
    }

    public func loadState() async throws -> PersistedState {
        state.withLock { s in
            PersistedState(devices: s.order.compactMap { s.devices[$0] }, fleetAlerts: s.fleetAlerts)
        }
    }

    public func seenEventIds(_ requests: [(key: DeviceKey, eventIds: [String])]) async throws -> [Set<String>] {
        state.withLock { s in
            requests.map { request in
                let seen = s.seen[request.key] ?? [:]
                return Set(request.eventIds.filter { seen[$0] != nil })
            }
        }
    }

    public func commit(_ changes: StoreChanges) async throws {
        if let error = failNextCommit.withLock({ e -> (any Error & Sendable)? in defer { e = nil }; return e }) {
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

    public func pruneEventIds(recordedBefore cutoff: Timestamp) async throws -> Int {
        state.withLock { s in
            var removed = 0
            for key in s.seen.keys {
                let before = s.seen[key]?.count ?? 0
                s.seen[key] = s.seen[key]?.filter { $0.value >= cutoff }
                removed += before - (s.seen[key]?.count ?? 0)
            }
            return removed
        }
    }

    public func close() async throws {}
}

extension AlertQuery {
    /// Whether an alert passes the filters (not the page position).
    public func matches(_ alert: AlertRecord) -> Bool {
        (state == nil || alert.state == state) && (kind == nil || alert.kind == kind)
            && (appId == nil || alert.appId == appId) && (deviceId == nil || alert.deviceId == deviceId)
    }
}
