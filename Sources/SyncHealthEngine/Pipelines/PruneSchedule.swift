import SyncHealthCore

/// When the engine forgets expired event ids: a pass every hour, or every seventh of the retention when that is
/// shorter (the embedded store's generation of ids, so that a window of minutes is kept to its size too), run as
/// batches between groups until a batch comes back short. A value the engine's loop keeps; it does no I/O.
struct PruneSchedule {
    /// How often a pass starts, at most.
    static let interval: Duration = .seconds(3600)

    private var lastStart: Timestamp
    /// The cutoff of the pass under way.
    private var pending: Timestamp?
    /// Ids removed by the pass under way, or by the last one once it ended.
    private(set) var lastPassRemoved = 0

    /// A schedule whose first pass starts an hour after `start`.
    init(start: Timestamp) {
        lastStart = start
    }

    /// Whether a pass has batches left.
    var passUnderWay: Bool { pending != nil }

    /// The cutoff of the next batch to run, starting a pass when one is due; `nil` when there is nothing to do.
    mutating func cutoff(now: Timestamp, retention: Duration) -> Timestamp? {
        if pending == nil, now - lastStart > min(Self.interval, retention / 7) {
            lastStart = now
            pending = now - retention
            lastPassRemoved = 0
        }
        return pending
    }

    /// Records a batch's result: a batch short of `limit` ends the pass.
    mutating func removed(_ count: Int, limit: Int) {
        lastPassRemoved += count
        if count < limit { pending = nil }
    }

    /// Ends the pass under way without finishing it; the next pass, an hour on, takes up what is left.
    mutating func abandonPass() {
        pending = nil
    }
}
