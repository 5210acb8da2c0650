import Foundation
import GRDB
import SyncHealthCore
import SyncHealthEngineTesting
import SyncHealthTestSupport
import Testing

@testable import SyncHealthSQLite
@testable import SyncHealthStore

/// The pacer that holds a backup's copy to a share of one core.
@Suite("Backup pacer")
struct BackupPacerTests {
    /// A store holding 40,000 event ids, folded: enough copying for a pacer with 1-ms slices to pause.
    static func filledStore() async throws -> (SQLiteStore, String) {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir, synchronous: .normal)
        let key = DeviceKey(appId: "app", deviceId: "1")
        _ = try await store.record((0..<40_000).map { "event-\($0)" }, of: key, at: Timestamp(microseconds: 1_000_000))
        try await store.fold()
        return (store, dir)
    }

    static func eventIds(in path: String) throws -> Int {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        return try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM event_ids") ?? -1 }
    }

    @Test("a paced copy pauses between slices of work, and the copy holds every id")
    func pacedCopyPausesAndIsWhole() async throws {
        let (store, dir) = try await Self.filledStore()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let copy = dir + "/paced.sqlite"
        let started = ContinuousClock.now
        let pauses = try await store.backup(to: copy, work: .milliseconds(1), pause: .milliseconds(5))
        let took = ContinuousClock.now - started
        #expect(pauses > 0)
        #expect(took >= .milliseconds(5) * pauses, "each pause sleeps")
        #expect(try Self.eventIds(in: copy) == 40_000)
        #expect(try SQLiteStore.checkBackup(at: copy).schema == SQLiteStore.migrator.migrations.last)
        try await store.close()
    }

    @Test("without a pause the copy runs flat out, and holds every id")
    func unpacedCopyNeverPauses() async throws {
        let (store, dir) = try await Self.filledStore()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let copy = dir + "/flat.sqlite"
        #expect(try await store.backup(to: copy, work: .milliseconds(1), pause: .zero) == 0)
        #expect(try Self.eventIds(in: copy) == 40_000)
        try await store.close()
    }

    @Test("cancelling a copy stops it within its pause, leaves no file, and the store backs up again after")
    func cancelledCopyStops() async throws {
        let (store, dir) = try await Self.filledStore()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let copy = dir + "/cancelled.sqlite"
        // A minute's pause after each millisecond of work: only a stop ends this copy within the test.
        let backup = Task { try await store.backup(to: copy, work: .milliseconds(1), pause: .seconds(60)) }
        #expect(try await eventually { FileManager.default.fileExists(atPath: copy) }, "the copy started")
        backup.cancel()
        try await within(.seconds(30)) {
            await #expect(throws: CancellationError.self) { try await backup.value }
        }
        #expect(!FileManager.default.fileExists(atPath: copy))
        let after = dir + "/after.sqlite"
        #expect(try await store.backup(to: after, work: .milliseconds(1), pause: .zero) == 0)
        #expect(try Self.eventIds(in: after) == 40_000)
        try await store.close()
    }
}
