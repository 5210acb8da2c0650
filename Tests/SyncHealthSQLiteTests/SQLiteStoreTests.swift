import Foundation
import GRDB
import Logging
import ServiceLifecycle
import SyncHealthCore
import SyncHealthEngineTesting
import SyncHealthPostgres
import SyncHealthTestSupport
import Testing

@testable import SyncHealthSQLite
@testable import SyncHealthStore

@Suite("SQLite store: durability and bad data directories")
struct SQLiteStoreTests {
    @Test("state survives closing and reopening the data directory")
    func reopen() async throws {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir)
        var changes = StoreChanges(recordedAt: t0)
        changes.devices = [richRecord("a")]
        changes.eventIds = [(DeviceKey(appId: "com.example", deviceId: "a"), "e1")]
        try await store.commit(changes)
        try await store.close()
        let reopened = try SQLiteStore(directory: dir)
        #expect(try await reopened.loadState().devices == [richRecord("a")])
        #expect(try await reopened.seenEventIds([(DeviceKey(appId: "com.example", deviceId: "a"), ["e1"])]) == [["e1"]])
        try await reopened.close()
    }

    @Test("a data directory held by another server is refused")
    func locked() async throws {
        let dir = temporaryDirectory()
        let first = try SQLiteStore(directory: dir)
        #expect(throws: StoreError.locked(path: dir)) { try SQLiteStore(directory: dir) }
        try await first.close()
        let again = try SQLiteStore(directory: dir)
        try await again.close()
    }

    @Test("a lock let go within the retry window (a forked child's copy until its exec) is taken, not refused")
    func lockReleasedSoonIsTaken() async throws {
        let dir = temporaryDirectory()
        try await SQLiteStore(directory: dir).close()
        // Another open file of the lock, as a child between fork and exec holds it.
        let other = open(dir + "/synchealth.lock", O_RDWR)
        try #require(other >= 0 && flock(other, LOCK_EX | LOCK_NB) == 0)
        let started = ContinuousClock.now
        // A thread of its own: the store's open blocks its caller's thread while it waits.
        Thread.detachNewThread {
            usleep(150_000)
            close(other)
        }
        let store = try SQLiteStore(directory: dir)
        #expect(ContinuousClock.now - started >= .milliseconds(100), "it waited for the lock")
        try await store.close()
    }

    @Test("close releases the data directory even when its final checkpoint fails")
    func closeReleasesLockOnFailure() async throws {
        let dir = temporaryDirectory()
        let first = try SQLiteStore(directory: dir)
        try await first.commit(StoreChanges(recordedAt: t0))
        // A cancelled task's database access throws: the close's checkpoint fails.
        let closing = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await first.close()
        }
        await #expect(throws: (any Error).self) { try await closing.value }
        let again = try SQLiteStore(directory: dir)
        try await again.close()
    }

    @Test("close waits for a checkpoint another connection is running instead of failing busy")
    func closeWaitsForCheckpoint() async throws {
        let dir = temporaryDirectory()
        let path = dir + "/synchealth.sqlite"
        let store = try SQLiteStore(directory: dir, synchronous: .normal)
        var changes = StoreChanges(recordedAt: t0)
        changes.devices = [richRecord("a")]
        try await store.commit(changes)
        // A reader holds an old snapshot, so a FULL checkpoint on another connection waits for it, holding
        // SQLite's checkpoint lock: the close's own checkpoint is refused (busy) until the reader lets go.
        let reader = try DatabaseQueue(path: path)
        var busyWaiting = Configuration()
        busyWaiting.busyMode = .timeout(5)
        let other = try DatabaseQueue(path: path, configuration: busyWaiting)
        let reading = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let checkpointed = DispatchSemaphore(value: 0)
        Thread {
            try? reader.read { db in
                _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM devices")
                reading.signal()
                release.wait()
            }
        }.start()
        reading.wait()
        changes.devices = [richRecord("b")]
        try await store.commit(changes)
        Thread {
            _ = try? other.writeWithoutTransaction { db in try db.checkpoint(.full) }
            checkpointed.signal()
        }.start()
        try await Task.sleep(for: .milliseconds(100))
        Thread {
            usleep(200_000)
            release.signal()
        }.start()
        try await store.close()
        checkpointed.wait()
        let reopened = try SQLiteStore(directory: dir)
        #expect(try await reopened.loadState().devices.count == 2)
        try await reopened.close()
    }

    @Test("a corrupt database file is refused with a clear error, and left untouched")
    func corrupt() throws {
        let dir = temporaryDirectory()
        let path = dir + "/synchealth.sqlite"
        let garbage = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        FileManager.default.createFile(atPath: path, contents: garbage)
        do {
            _ = try SQLiteStore(directory: dir)
            Issue.record("opened a corrupt file")
        } catch let error as StoreError {
            guard case .corrupt = error else {
                Issue.record("wrong error \(error)")
                return
            }
            #expect(error.description.contains("corrupt"))
        }
        #expect(FileManager.default.contents(atPath: path) == garbage, "no silent reset")
    }

    @Test("a database damaged inside its pages fails its integrity check")
    func damagedPages() async throws {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir)
        var changes = StoreChanges(recordedAt: t0)
        changes.devices = (0..<2000).map { richRecord("d\($0)") }
        try await store.commit(changes)
        try await store.close()
        // Overwrite a stretch in the middle of the file, keeping the header intact.
        let path = dir + "/synchealth.sqlite"
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.seek(toOffset: 8192)
        handle.write(Data(repeating: 0xA5, count: 16384))
        try handle.close()
        #expect(throws: StoreError.self) { try SQLiteStore(directory: dir) }
    }

    @Test(
        "commits get the durability asked for: FULL by default, NORMAL when chosen",
        arguments: [
            (SQLiteStore.Synchronous.full, 2), (.normal, 1),
        ]
    )
    func synchronousSetting(mode: SQLiteStore.Synchronous, expected: Int) async throws {
        let store = try SQLiteStore(directory: temporaryDirectory(), synchronous: mode)
        // GRDB's pool sets NORMAL when it opens in WAL mode; the store's own setting must win.
        #expect(try await store.effectiveSynchronous() == expected)
        try await store.close()
    }

    @Test("the writer and the readers keep a page cache of SQLiteStore.pageCacheKiB, not SQLite's 2 MiB")
    func pageCacheSize() async throws {
        let store = try SQLiteStore(directory: temporaryDirectory())
        let expected = -SQLiteStore.pageCacheKiB
        #expect(expected < -2000)
        #expect(try await store.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA cache_size") } == expected)
        #expect(try await store.pool.read { db in try Int.fetchOne(db, sql: "PRAGMA cache_size") } == expected)
        try await store.close()
    }

    /// The devices stored in the main database file alone, as a copy without its WAL shows them.
    static func devicesInMainFile(_ dir: String) throws -> Int {
        let copy = temporaryDirectory() + "/main-only.sqlite"
        try FileManager.default.copyItem(atPath: dir + "/synchealth.sqlite", toPath: copy)
        let raw = try GRDBTestHelper.open(copy)
        return try raw.queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM devices") ?? -1 }
    }

    @Test(
        "the maintenance service folds the journal into the tables and checkpoints; without it commits wait in the journal until close",
        arguments: [true, false]
    )
    func maintenance(running: Bool) async throws {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir, synchronous: .normal)
        // The schema goes into the main file first, so that only the fold of the commit below is in the WAL.
        _ = try await store.pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
        #expect(try Self.devicesInMainFile(dir) == 0)
        try await withThrowingTaskGroup(of: Void.self) { group in
            if running { group.addTask { try await store.maintenance(logger: Logger(label: "test")).run() } }
            var changes = StoreChanges(recordedAt: t0)
            changes.devices = [richRecord("a"), richRecord("b")]
            try await store.commit(changes)
            let copied = try await eventually(tries: running ? 300 : 20) { try Self.devicesInMainFile(dir) == 2 }
            #expect(copied == running)
            #expect(try Self.journalSegments(dir).isEmpty == running)
            try await store.close()
            group.cancelAll()
        }
        // Closing folds what is left and checkpoints: one self-contained file, no journal.
        #expect(try Self.devicesInMainFile(dir) == 2)
        #expect(try Self.journalSegments(dir).isEmpty)
    }

    static func journalSegments(_ dir: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasPrefix(CommitJournal.prefix) }
    }

    @Test("event ids stored before the expiry log are still known after the upgrade, and expire by their time")
    func eventIdsSurviveLogMigration() async throws {
        let day: Int64 = 86_400
        let dir = temporaryDirectory()
        let key = DeviceKey(appId: "app", deviceId: "1")
        let other = DeviceKey(appId: "app", deviceId: "2")
        // A store as the version before the log left it: ids with their time, expired through an index.
        try await oldStore(
            in: dir,
            upTo: "v2: webhooks, outbox, delivery log",
            eventIds: [(key, "e-1", seconds(10)), (key, "e-2", seconds(20)), (other, "e-3", seconds(day + 30))]
        )

        let store = try SQLiteStore(directory: dir, synchronous: .normal)
        #expect(
            try await store.seenEventIds([(key: key, eventIds: ["e-1", "e-2", "e-3"]), (key: other, eventIds: ["e-3"])]) == [
                ["e-1", "e-2"], ["e-3"],
            ]
        )
        // The upgrade to generations (v10) puts the ids in the generation of their day.
        #expect(try await store.pruneEventIds(recordedBefore: seconds(day - 1)) == 0)
        #expect(try await store.pruneEventIds(recordedBefore: seconds(day)) == 2)
        #expect(try await store.seenEventIds([(key: key, eventIds: ["e-1", "e-2"]), (key: other, eventIds: ["e-3"])]) == [[], ["e-3"]])
        #expect(try await store.pruneEventIds(recordedBefore: seconds(2 * day)) == 1)
        #expect(try await store.seenEventIds([(key: other, eventIds: ["e-3"])]) == [[]])
        try await store.close()
        let raw = try DatabaseQueue(path: dir + "/synchealth.sqlite")
        #expect(try await raw.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM sqlite_master WHERE name = 'seen_events_recorded_at'") } == 0)
        try raw.close()
    }

    @Test("an id forgotten and recorded again is kept until its new time expires")
    func idRecordedAgainAfterExpiry() async throws {
        let store = try SQLiteStore(directory: temporaryDirectory(), synchronous: .normal, eventIdGeneration: .seconds(1))
        let key = DeviceKey(appId: "app", deviceId: "1")
        func record(_ id: String, at: Timestamp) async throws -> Set<String> { try await store.record([id], of: key, at: at) }
        #expect(try await record("x", at: seconds(10)) == [])
        #expect(try await record("x", at: seconds(15)) == ["x"], "a repeat keeps its first time")
        #expect(try await store.pruneEventIds(recordedBefore: seconds(20)) == 1)
        #expect(try await record("x", at: seconds(30)) == [], "forgotten, so new again")
        #expect(try await store.pruneEventIds(recordedBefore: seconds(25)) == 0)
        #expect(try await store.seenEventIds([(key: key, eventIds: ["x"])]) == [["x"]])
        #expect(try await store.pruneEventIds(recordedBefore: seconds(31)) == 1)
        #expect(try await store.seenEventIds([(key: key, eventIds: ["x"])]) == [[]])
        try await store.close()
    }

    @Test("a database written by a newer schema is refused")
    func newerSchema() async throws {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir)
        try await store.close()
        // A future version registered a migration this version does not know.
        let raw = try GRDBTestHelper.open(dir + "/synchealth.sqlite")
        try raw.execute("INSERT INTO grdb_migrations (identifier) VALUES ('v99: from the future')")
        #expect(throws: StoreError.newerSchema(path: dir + "/synchealth.sqlite")) { try SQLiteStore(directory: dir) }
    }
}
