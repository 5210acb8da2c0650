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
    /// The order of the stored fields. Fixed, so that points stored by an older version read back the same when a
    /// summary value or an error class is added (a new one goes at the end).
    static let storedSummaries: [SyncStateSummary] = [
        .noNetwork, .accountNotAvailable, .error, .notSyncing, .notStarted, .inProgress, .succeeded, .unknown,
    ]
    static let storedErrorClasses: [ErrorClass] = [.unknown, .transient, .appRecoverable, .userAction, .dataLoss, .developer]

    /// The stored form of a history point: devices, active, silent, broken, activeBroken, notSyncing, then the
    /// counts by summary and by error class in the orders above, as decimal numbers joined by `,`, trailing zeros
    /// left out. About 60 bytes for a busy scope.
    public var encodedFields: String {
        var values = [devices, active, silent, broken, activeBroken, notSyncing]
        for summary in Self.storedSummaries { values.append(SyncStateSummary.allCases.firstIndex(of: summary).map { bySummaryCounts[$0] } ?? 0) }
        for cls in Self.storedErrorClasses { values.append(ErrorClass.allCases.firstIndex(of: cls).map { byErrorClassCounts[$0] } ?? 0) }
        while values.last == 0 { values.removeLast() }
        return values.map(String.init).joined(separator: ",")
    }

    /// Counts read back from `encodedFields`; a malformed number reads as zero.
    public init(encodedFields text: String) {
        self.init()
        let values = text.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).map { Int(Substring($0)) ?? 0 }
        func value(_ i: Int) -> Int { i < values.count ? values[i] : 0 }
        devices = value(0)
        active = value(1)
        silent = value(2)
        broken = value(3)
        activeBroken = value(4)
        notSyncing = value(5)
        for (offset, summary) in Self.storedSummaries.enumerated() {
            if let i = SyncStateSummary.allCases.firstIndex(of: summary) { bySummaryCounts[i] = value(6 + offset) }
        }
        let classes = 6 + Self.storedSummaries.count
        for (offset, cls) in Self.storedErrorClasses.enumerated() {
            if let i = ErrorClass.allCases.firstIndex(of: cls) { byErrorClassCounts[i] = value(classes + offset) }
        }
    }
}
