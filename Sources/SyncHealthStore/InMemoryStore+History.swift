public import SyncHealthCore

/// A history point's identity: its slot and scope.
struct HistoryKey: Hashable {
    var at: Timestamp
    var scope: FleetScope
}

extension InMemoryStore {
    public func recordHistory(_ points: [HistoryPoint], resolution: HistoryResolution) async throws {
        withState { s in
            for p in points where s.history[resolution, default: [:]][HistoryKey(at: p.at, scope: p.scope)] == nil {
                s.history[resolution, default: [:]][HistoryKey(at: p.at, scope: p.scope)] = p.counts
            }
        }
    }

    public func history(_ scope: FleetScope, resolution: HistoryResolution, from: Timestamp, to: Timestamp) async throws -> [HistoryPoint] {
        withState { s in
            (s.history[resolution] ?? [:])
                .filter { $0.key.scope == scope && $0.key.at >= from && $0.key.at <= to }
                .map { HistoryPoint(at: $0.key.at, scope: scope, counts: $0.value) }
                .sorted { $0.at < $1.at }
        }
    }

    public func pruneHistory(_ resolution: HistoryResolution, before cutoff: Timestamp) async throws {
        withState { s in s.history[resolution] = s.history[resolution]?.filter { $0.key.at >= cutoff } }
    }
}
