/// Decides when the embedded store returns free pages to the file system, and how many at a time.
///
/// SQLite keeps the pages that deletes free (expired event ids, forgotten devices, aged-out history) in the file
/// and reuses them for later writes, so a file never shrinks on its own: it keeps the largest size its live pages
/// ever reached. With `auto_vacuum = INCREMENTAL`, `PRAGMA incremental_vacuum(n)` moves up to `n` pages from the
/// file's end into free slots and truncates it. That costs writes, and pages freed now are mostly reused within
/// the day, so reclaiming starts only once free pages pass a sixteenth of the file (`high`), and then goes on in
/// small steps (paced by `SQLiteMaintenance.reclaimEvery`) until they are down to a thirty-second (`low`): a file
/// stays within ~7% of its live pages (docs/architecture.md#free-pages-go-back-to-the-file-system).
///
/// A value type: `step` is told the file's counts and returns how many pages to reclaim now; the caller does it.
public struct FreePageReclaimer: Sendable, Equatable {
    /// The most pages one step reclaims: 128 pages of 4 KiB, so that a step holds the writer for a millisecond or
    /// two.
    public var pagesPerStep: Int
    /// Free pages never worth a step, whatever the file's size.
    public var floorPages: Int
    /// Whether a run of steps is under way (free pages passed `high` and are not yet down to `low`).
    public private(set) var reclaiming = false

    /// Creates one; see the properties.
    public init(pagesPerStep: Int = 128, floorPages: Int = 2_048) {
        self.pagesPerStep = pagesPerStep
        self.floorPages = floorPages
    }

    /// Free pages past which a run of steps starts.
    public func high(pageCount: Int) -> Int { max(floorPages, pageCount / 16) }
    /// Free pages at which a run of steps ends.
    public func low(pageCount: Int) -> Int { max(floorPages / 2, pageCount / 32) }

    /// The pages to reclaim now (0: none), for a file of `pageCount` pages of which `freePages` are free.
    public mutating func step(pageCount: Int, freePages: Int) -> Int {
        if !reclaiming, freePages > high(pageCount: pageCount) { reclaiming = true }
        guard reclaiming else { return 0 }
        let excess = freePages - low(pageCount: pageCount)
        guard excess > 0 else {
            reclaiming = false
            return 0
        }
        return min(pagesPerStep, excess)
    }
}
