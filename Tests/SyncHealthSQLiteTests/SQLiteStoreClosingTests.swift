import Foundation
import SyncHealthTestSupport
import Testing

@testable import SyncHealthSQLite
@testable import SyncHealthStore

/// What `SQLiteMaintenance` may still do after the engine has closed the store: the two stop concurrently.
@Suite("SQLite store closing")
struct SQLiteStoreClosingTests {
    @Test("a checkpoint or a writeback start after the store closed does nothing, and does not crash")
    func maintenanceAfterCloseIsHarmless() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SQLiteStore(directory: dir)
        #expect(store.writebackFiles.startWriteback() == 0)
        try await store.close()
        await store.checkpointer.checkpoint()
        store.checkpointer.checkpointBlocking()
        store.checkpointer.close()
        #expect(store.writebackFiles.startWriteback() == 0)
        let pacer = WritebackPacer(files: store.writebackFiles, intervalMicroseconds: 1_000)
        try await pacer.during { try await Task.sleep(for: .milliseconds(20)) }
        await pacer.shutdown()
        #expect(pacer.rounds > 0 && pacer.refusals == 0, "the pacer ran over no files")
    }
}
