/// Decides when the embedded store returns free pages to the file system, and how many at a time.
///
/// SQLite keeps the pages that deletes free (expired event ids, forgotten devices, aged-out history) in the file
/// and reuses them for later writes, so a file never shrinks on its own: it keeps the largest size its live pages
/// ever reached. With `auto_vacuum = INCREMENTAL`, `PRAGMA incremental_vacuum(n)` moves up to `n` pages from the
/// file's end into free slots and truncates it.
///
/// That costs writes, and most free pages are a loaded store's working space: a fold frees the pages of the rows it
/// moves and the next folds take them again. Returning those only grows the file back at its end, a write for a
/// write. So the reclaimer counts as *settled* only the pages that stayed free for a whole `settle` span (the least
/// number free seen in it), and acts on those alone. Reclaiming starts once settled pages pass a sixteenth of the
/// file (`high`) and goes on in small steps (paced by `SQLiteMaintenance.reclaimEvery`) until they are down to a
/// thirty-second (`low`): a file stays within ~7% of its live pages plus its working space
/// (docs/architecture.md#free-pages-go-back-to-the-file-system).
///
/// A value type with no clock of its own: `step` is told the time since the service started and the file's counts,
/// and returns how many pages to reclaim now; the caller does it.
public struct FreePageReclaimer: Sendable, Equatable {
    /// The most pages one step reclaims: 128 pages of 4 KiB, so that a step holds the writer for a millisecond or
    /// two.
    public var pagesPerStep: Int
    /// Free pages never worth a step, whatever the file's size.
    public var floorPages: Int
    /// How long a page must stay free to count as settled. `.zero` counts every free page at once (a simulation
    /// whose days pass in seconds).
    public var settle: Duration
    /// Whether a run of steps is under way (settled pages passed `high` and are not yet down to `low`).
    public private(set) var reclaiming = false
    /// The least free pages seen in each of the last slices of the settle span, oldest first; a slice is an eighth
    /// of `settle`, so the span is known to within an eighth.
    private var slices: [Slice] = []
    /// When the first count was seen.
    private var firstSeen: Duration?

    /// The least free pages seen in one slice of time.
    private struct Slice: Sendable, Equatable {
        var index: Int64
        var leastFree: Int
    }

    /// Creates one; see the properties.
    public init(pagesPerStep: Int = 128, floorPages: Int = 2_048, settle: Duration = .seconds(600)) {
        self.pagesPerStep = pagesPerStep
        self.floorPages = floorPages
        self.settle = settle
    }

    /// Free pages past which a run of steps starts.
    public func high(pageCount: Int) -> Int { max(floorPages, pageCount / 16) }
    /// Free pages at which a run of steps ends.
    public func low(pageCount: Int) -> Int { max(floorPages / 2, pageCount / 32) }

    /// The pages to reclaim now (0: none), `elapsed` after the service started, for a file of `pageCount` pages of
    /// which `freePages` are free.
    public mutating func step(elapsed: Duration, pageCount: Int, freePages: Int) -> Int {
        guard let settled = observe(elapsed: elapsed, freePages: freePages) else { return 0 }
        if !reclaiming, settled > high(pageCount: pageCount) { reclaiming = true }
        guard reclaiming else { return 0 }
        let excess = settled - low(pageCount: pageCount)
        guard excess > 0 else {
            reclaiming = false
            return 0
        }
        return min(pagesPerStep, excess)
    }

    /// Records `freePages` and returns the pages free throughout the last `settle`, or nil before a whole span has
    /// been seen.
    private mutating func observe(elapsed: Duration, freePages: Int) -> Int? {
        guard settle > .zero else { return freePages }
        if firstSeen == nil { firstSeen = elapsed }
        let width = settle / 8
        let index = Int64(elapsed / width)
        if let last = slices.last, last.index == index {
            slices[slices.count - 1].leastFree = min(last.leastFree, freePages)
        } else {
            slices.append(Slice(index: index, leastFree: freePages))
        }
        // Nine slices: the current one and the eight whole ones before it.
        slices.removeAll { $0.index < index - 8 }
        guard let firstSeen, elapsed - firstSeen >= settle else { return nil }
        return slices.map(\.leastFree).min()
    }
}
