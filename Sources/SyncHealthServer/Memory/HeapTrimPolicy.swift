/// When the heap trimmer trims: once each time the process turns quiet after being busy, and otherwise when its
/// resident set has grown since the last trim, under load at most once per `busyInterval`.
///
/// A trim walks every allocator arena, holding each one's lock meanwhile, so it is not free. Under steady load the
/// pages it gives back are faulted in again within a second, but while devices are being created the heap grows
/// without trims; so under load it trims at most every `busyInterval`, and only after growth
/// (docs/benchmarks-log.md#freed-memory-the-heap-kept). When a burst has passed, its memory is freed without the
/// resident set growing (a trim under load may have found it all still in use), so the first quiet reading after a
/// busy one trims whatever the growth. An idle process is not trimmed again and again. A value type fed readings,
/// with no clock of its own; `HeapTrimmer` does the reading and the trimming.
public struct HeapTrimPolicy: Sendable {
    /// What the trimmer reads of the process before it decides.
    public struct Reading: Sendable, Equatable {
        /// When the reading was taken.
        public var at: ContinuousClock.Instant
        /// The CPU time all of the process's threads have used so far.
        public var cpu: Duration
        /// The resident set, in bytes.
        public var resident: Int

        /// A reading taken `at`, of `cpu` used so far and `resident` bytes resident.
        public init(at: ContinuousClock.Instant, cpu: Duration, resident: Int) {
            self.at = at
            self.cpu = cpu
            self.resident = resident
        }
    }

    /// The process is quiet while its threads use less than this share of one core between two readings.
    public var quietShare: Double
    /// How much the resident set must have grown since the last trim (or the first reading) for a trim under
    /// load, or another trim while the process stays quiet.
    public var growth: Int
    /// Under a load that never gets quiet, the least time between two trims.
    public var busyInterval: Duration

    private var previous: Reading?
    /// The resident set after the last trim, or at the first reading.
    private var floor = 0
    private var lastTrim: ContinuousClock.Instant?
    /// Whether the process has been trimmed since it was last busy (at the start there is nothing to give back).
    private var trimmedSinceBusy = true

    /// A policy that counts the process quiet below `quietShare` of a core, trims once each time it turns quiet,
    /// and otherwise once the resident set has grown by `growth` bytes, under load at most once per `busyInterval`.
    public init(quietShare: Double = 0.25, growth: Int = 16 << 20, busyInterval: Duration = .seconds(10)) {
        self.quietShare = quietShare
        self.growth = growth
        self.busyInterval = busyInterval
    }

    /// A trim the policy asks for.
    public enum Trim: Sendable, Equatable {
        /// Under load, the resident set having grown.
        case underLoad
        /// The process is quiet: what is still allocated is what it keeps, and measuring the heap (which holds
        /// each arena's lock while it walks the free lists) delays no request.
        case atRest
    }

    /// Whether to trim now, given a new reading, and in which state the process is. The first reading only sets
    /// the baseline.
    public mutating func shouldTrim(after reading: Reading) -> Trim? {
        defer { previous = reading }
        guard let previous, let lastTrim else {
            floor = reading.resident
            lastTrim = reading.at
            return nil
        }
        let elapsed = reading.at - previous.at
        guard elapsed > .zero else { return nil }
        let grown = reading.resident >= floor + growth
        if (reading.cpu - previous.cpu) / elapsed < quietShare { return grown || !trimmedSinceBusy ? .atRest : nil }
        trimmedSinceBusy = false
        return grown && reading.at - lastTrim >= busyInterval ? .underLoad : nil
    }

    /// Records a trim that left `resident` bytes resident at `at`: growth is counted from there.
    public mutating func trimmed(leaving resident: Int, at: ContinuousClock.Instant) {
        floor = resident
        lastTrim = at
        trimmedSinceBusy = true
    }
}
