import Foundation
import GRDB
import Logging
import SyncHealthCore
import SyncHealthEngineTesting
import SyncHealthTestSupport
import Testing

@testable import SyncHealthSQLite
@testable import SyncHealthStore

/// When free pages go back to the file system.
@Suite("Free page reclaimer")
struct FreePageReclaimerTests {
    @Test("nothing is reclaimed until free pages pass a sixteenth of the file")
    func waitsForHigh() {
        var reclaimer = FreePageReclaimer(pagesPerStep: 100, floorPages: 10)
        #expect(reclaimer.step(pageCount: 16_000, freePages: 1_000) == 0)
        #expect(!reclaimer.reclaiming)
    }

    @Test("past a sixteenth, steps of at most pagesPerStep go on down to a thirty-second, then stop")
    func stepsDownToLow() {
        var reclaimer = FreePageReclaimer(pagesPerStep: 100, floorPages: 10)
        // high 1,000, low 500
        #expect(reclaimer.step(pageCount: 16_000, freePages: 1_001) == 100)
        #expect(reclaimer.step(pageCount: 15_900, freePages: 901) == 100)
        // Below high now, but the run goes on to low (15,600 / 32 = 487).
        #expect(reclaimer.step(pageCount: 15_600, freePages: 540) == 53)
        #expect(reclaimer.step(pageCount: 15_547, freePages: 485) == 0)
        #expect(!reclaimer.reclaiming)
        #expect(reclaimer.step(pageCount: 15_547, freePages: 900) == 0, "a new run waits for high again")
    }

    @Test("a small file keeps up to floorPages free")
    func floorHoldsForSmallFiles() {
        var reclaimer = FreePageReclaimer(pagesPerStep: 100, floorPages: 2_048)
        #expect(reclaimer.step(pageCount: 3_000, freePages: 2_000) == 0)
        #expect(reclaimer.step(pageCount: 3_000, freePages: 2_049) == 100)
    }
}

/// The embedded store gives the disk back the pages it frees.
@Suite("Free pages")
struct FreePageTests {
    static let key = DeviceKey(appId: "app", deviceId: "1")

    /// A store holding 40,000 event ids, folded, then all of them pruned: megabytes of free pages.
    static func storeWithFreePages(_ dir: String) async throws -> SQLiteStore {
        let store = try SQLiteStore(directory: dir, synchronous: .normal)
        _ = try await store.record((0..<40_000).map { "event-\($0)" }, of: key, at: Timestamp(microseconds: 1_000_000))
        try await store.fold()
        while try await store.pruneEventIds(recordedBefore: Timestamp(microseconds: 1_000_000_000_000), limit: 100_000) > 0 {}
        return store
    }

    /// A store file as releases before this one made it: no `auto_vacuum`.
    static func makeOldStyleFile(_ dir: String) throws {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let queue = try DatabaseQueue(path: dir + "/synchealth.sqlite")
        try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = WAL") }
        try queue.close()
    }

    static func fileBytes(_ dir: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: dir + "/synchealth.sqlite"))?[.size] as? Int) ?? -1
    }

    @Test("the maintenance service returns a new store's free pages, and the file shrinks")
    func maintenanceReturnsFreePages() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try await Self.storeWithFreePages(dir)
        let before = try await store.pageCounts()
        #expect(before.reclaimable)
        #expect(before.free > 200, "pruning freed pages: \(before)")
        var maintenance = store.maintenance(logger: Logger(label: "test"), niceness: 0)
        maintenance.reclaimer = FreePageReclaimer(pagesPerStep: 64, floorPages: 16)
        maintenance.reclaimEvery = .zero
        let service = Task { try await maintenance.run() }
        var after = before
        _ = try await eventually(tries: 1_000, every: .milliseconds(20)) {
            after = try await store.pageCounts()
            return after.free <= max(8, after.pages / 32)
        }
        service.cancel()
        _ = try? await service.value
        #expect(after.free <= max(8, after.pages / 32), "free pages left: \(after)")
        #expect(after.pages < before.pages - 150)
        try await store.close()
        #expect(Self.fileBytes(dir) <= after.pages * after.pageSize, "the file is truncated to its pages")
        let reopened = try SQLiteStore(directory: dir, synchronous: .normal)
        #expect(try await reopened.pageCounts().free <= after.free)
        try await reopened.close()
    }

    @Test("a store made before free pages were returned keeps them until compact, which keeps its data")
    func compactConvertsAnOldStore() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.makeOldStyleFile(dir)
        let store = try await Self.storeWithFreePages(dir)
        _ = try await store.record(["kept"], of: Self.key, at: Timestamp(microseconds: 2_000_000_000_000))
        let old = try await store.pageCounts()
        #expect(!old.reclaimable)
        #expect(try store.reclaimFreePagesBlocking(1_000) == old.free, "an old store cannot return pages")
        try await store.close()

        let (before, after) = try await SQLiteStore.compact(directory: dir)
        #expect(!before.reclaimable && before.free == old.free)
        #expect(after.reclaimable && after.free == 0 && after.pages < before.pages)
        let reopened = try SQLiteStore(directory: dir, synchronous: .normal)
        #expect(try await reopened.pageCounts().reclaimable)
        #expect(try await reopened.seenEventIds([(Self.key, ["kept"])]) == [["kept"]], "what the store held is kept")
        try await reopened.close()
    }

    @Test("a backup of an old store can return free pages, so restoring it converts the store")
    func backupOfAnOldStoreIsReclaimable() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.makeOldStyleFile(dir)
        let store = try SQLiteStore(directory: dir, synchronous: .normal)
        _ = try await store.record(["a"], of: Self.key, at: Timestamp(microseconds: 1_000_000))
        #expect(!(try await store.pageCounts().reclaimable))
        try await store.backup(to: dir + "/copy.sqlite")
        try await store.close()
        let copy = try DatabaseQueue(path: dir + "/copy.sqlite")
        let mode = try await copy.read { db in try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") }
        #expect(mode == 2, "2 is INCREMENTAL")
        try copy.close()
    }
}
