import SyncHealthCore
import SyncHealthTestSupport
import Synchronization
import Testing

@testable import SyncHealthSQLite
@_spi(Testing) @testable import SyncHealthStore

/// A series of groups on the journal, when one group's sync fails.
struct JournalSeriesTests {
    @Test("a journal sync that fails in the middle of a series refuses that group alone: the groups before and after it stay, also after a crash")
    func failedSyncInASeries() async throws {
        let disk = FaultyDisk()
        let (dir, store) = try await CommitJournalTests.storeWithGroupA(on: disk)
        let refused = try await store.commitSeries { committer -> [String] in
            var refused: [String] = []
            for (i, name) in ["b", "c", "d"].enumerated() {
                // The second group's sync fails: its whole record reached the file first.
                if name == "c" { disk.faults.withLock { $0.syncs = 1 } }
                let group = CommitJournalTests.group(name, at: Int64(i + 1))
                do {
                    try committer.commit(claiming: group.eventIds.map { ($0.key, [$0.eventId]) }, at: group.recordedAt) { _ in (group, ()) }
                } catch {
                    refused.append(name)
                }
            }
            return refused
        }
        #expect(refused == ["c"])
        #expect(disk.faults.withLock { $0.syncs } == 0, "the fault was hit")
        let copy = try CommitJournalTests.crashCopy(of: dir)
        try await store.close()
        let reopened = try SQLiteStore(directory: copy)
        try await CommitJournalTests.check(reopened, has: ["a", "b", "d"], lacks: ["c"])
        try await reopened.close()
    }
}
