public import SyncHealthCore

/// How finely fleet history is kept: a point a minute for the last 48 hours, a point an hour for 30 days.
public enum HistoryResolution: String, Sendable, CaseIterable, Codable {
    case minute
    case hour

    /// The time between two points.
    public var step: Duration {
        switch self {
        case .minute: .seconds(60)
        case .hour: .seconds(3600)
        }
    }

    /// How long points of this resolution are kept.
    public var retention: Duration {
        switch self {
        case .minute: .seconds(48 * 3600)
        case .hour: .seconds(30 * 24 * 3600)
        }
    }

    /// `time` rounded down to a point of this resolution.
    public func slot(_ time: Timestamp) -> Timestamp {
        let step = self.step.microseconds
        let us = time.microseconds
        return Timestamp(microseconds: us - ((us % step) + step) % step)
    }
}

/// The fleet counters of one scope at one time.
public struct HistoryPoint: Sendable, Hashable {
    /// The slot the point stands for (a whole minute or hour).
    public var at: Timestamp
    /// The scope.
    public var scope: FleetScope
    /// The counters then.
    public var counts: FleetCounts

    /// Creates a point.
    public init(at: Timestamp, scope: FleetScope, counts: FleetCounts) {
        self.at = at
        self.scope = scope
        self.counts = counts
    }
}

/// Where fleet history is kept, so that a restart keeps it.
public protocol HistoryStore: Sendable {
    /// Writes points of one resolution. A point whose slot and scope are already stored is left as it is, so
    /// that replicas sampling the same minute, and the first sample of an hour, write each slot once.
    func recordHistory(_ points: [HistoryPoint], resolution: HistoryResolution) async throws
    /// The points of a scope from `from` to `to` (both included), oldest first.
    func history(_ scope: FleetScope, resolution: HistoryResolution, from: Timestamp, to: Timestamp) async throws -> [HistoryPoint]
    /// Forgets the points of a resolution older than `cutoff`.
    func pruneHistory(_ resolution: HistoryResolution, before cutoff: Timestamp) async throws
}

extension FleetCounts {
    /// The non-zero fields as `name=value` pairs joined by `,`: the stored form of a history point.
    public var encodedFields: String {
        nonZeroFields.map { "\($0.name)=\($0.value)" }.joined(separator: ",")
    }

    /// Counts read back from `encodedFields`; malformed pairs are skipped.
    public init(encodedFields text: String) {
        self.init(
            fields: text.split(separator: ",").compactMap { pair -> (name: String, value: Int)? in
                guard let eq = pair.firstIndex(of: "="), let value = Int(pair[pair.index(after: eq)...]) else { return nil }
                return (String(pair[..<eq]), value)
            }
        )
    }
}
