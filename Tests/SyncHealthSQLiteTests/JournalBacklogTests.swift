import SyncHealthCore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthSQLite
@testable import SyncHealthStore

/// The embedded store's backlog: the ids of groups in the journal stay visible to dedupe until a fold that wrote
/// them forgets them, whichever way folds and commits interleave.
@Suite("Journal backlog")
struct JournalBacklogTests {
    static let now = ContinuousClock.now

    /// An entry numbered `seq` that records `ids` for device hash 7.
    static func entry(_ seq: Int64, _ ids: String...) -> JournalEntry {
        JournalEntry(StoreChanges(recordedAt: t0), ids: ids.map { (hash: 7, id: Array($0.utf8)) }, seq: seq)
    }

    static func holds(_ backlog: JournalBacklog, _ id: String) -> Bool {
        backlog.contains(7, Array(id.utf8))
    }

    @Test("ids committed while a fold runs stay in the backlog after the fold forgets its own")
    func idsAddedDuringAFoldOutliveIt() {
        var backlog = JournalBacklog()
        backlog.add(Self.entry(1, "a"), bytes: 10, at: Self.now)
        let taken = backlog.take()
        backlog.add(Self.entry(2, "b"), bytes: 20, at: Self.now)
        #expect(taken.map(\.seq) == [1])
        #expect(Self.holds(backlog, "a") && Self.holds(backlog, "b"), "both are in the backlog while the fold runs")

        _ = backlog.remove(through: 1, at: Self.now)
        #expect(!Self.holds(backlog, "a"), "the fold wrote it into the tables")
        #expect(Self.holds(backlog, "b"), "committed after the fold took its entries, not yet in the tables")
        #expect(backlog.entries.map(\.seq) == [2])
        #expect(backlog.bytes == 20)
    }

    @Test("a fold that failed leaves its ids in the backlog until a later fold writes them")
    func failedFoldKeepsItsIds() {
        var backlog = JournalBacklog()
        backlog.add(Self.entry(1, "a"), bytes: 10, at: Self.now)
        _ = backlog.take()  // and the fold fails: nothing is removed
        backlog.add(Self.entry(2, "b"), bytes: 10, at: Self.now)
        #expect(Self.holds(backlog, "a") && Self.holds(backlog, "b"))

        #expect(backlog.take().map(\.seq) == [1, 2])
        _ = backlog.remove(through: 2, at: Self.now)
        #expect(!Self.holds(backlog, "a") && !Self.holds(backlog, "b"))
        #expect(backlog.entries.isEmpty && backlog.bytes == 0 && backlog.since == nil)
    }

    @Test("forgetting through a sequence number keeps the generations taken after it")
    func forgettingKeepsLaterGenerations() {
        var backlog = JournalBacklog()
        backlog.add(Self.entry(1, "a"), bytes: 10, at: Self.now)
        _ = backlog.take()  // a generation through 1
        backlog.add(Self.entry(2, "b"), bytes: 10, at: Self.now)
        _ = backlog.take()  // and one through 2, taken before the first was forgotten
        backlog.add(Self.entry(3, "c"), bytes: 10, at: Self.now)

        _ = backlog.remove(through: 1, at: Self.now)
        #expect(!Self.holds(backlog, "a"))
        #expect(Self.holds(backlog, "b") && Self.holds(backlog, "c"))
        _ = backlog.remove(through: 2, at: Self.now)
        #expect(!Self.holds(backlog, "b"))
        #expect(Self.holds(backlog, "c"))
        #expect(backlog.folds == 2)
    }
}
