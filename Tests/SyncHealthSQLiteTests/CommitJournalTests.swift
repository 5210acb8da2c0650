import Foundation
import GRDB
import Logging
import MetricsTestKit
import SyncHealthCore
import SyncHealthEngineTesting
import SyncHealthTestSupport
import Synchronization
import Testing

@testable import SyncHealthSQLite
@_spi(Testing) @testable import SyncHealthStore

/// The embedded store's commit journal: what is acknowledged is in the journal, reopening writes it into the
/// tables, a torn end is dropped, and nothing is written twice.
@Suite("Commit journal")
struct CommitJournalTests {
    /// A copy of a live store's data directory, as a crash would leave it (the store is not closed).
    static func crashCopy(of dir: String) throws -> String {
        let copy = temporaryDirectory()
        for name in try FileManager.default.contentsOfDirectory(atPath: dir) where name != "synchealth.lock" {
            try FileManager.default.copyItem(atPath: dir + "/" + name, toPath: copy + "/" + name)
        }
        return copy
    }

    static func message(_ id: String) -> OutboxMessage {
        OutboxMessage(id: id, webhookId: "wh-1", orderingKey: OutboxLine(storageKey: "line-\(id)"), payload: "{}", createdAt: t0, nextAttemptAt: t0)
    }

    /// A group with one device, one id, an alert and a webhook message, all named by `name`.
    static func group(_ name: String, at: Int64) -> StoreChanges {
        var changes = StoreChanges(recordedAt: t0 + .seconds(at))
        changes.devices = [richRecord(name)]
        changes.eventIds = [(DeviceKey(appId: "com.example", deviceId: name), "id-\(name)")]
        changes.alerts = [alert("alert-\(name)", .exportAtRisk, .firing, device: name, at: at)]
        changes.outbox = [message("msg-\(name)")]
        return changes
    }

    static func check(_ store: SQLiteStore, has names: [String], lacks missing: [String] = []) async throws {
        let devices = try await store.loadState().devices.map(\.key.deviceId)
        #expect(devices == names)
        for name in names + missing {
            let key = DeviceKey(appId: "com.example", deviceId: name)
            let known = names.contains(name)
            #expect(try await store.seenEventIds([(key: key, eventIds: ["id-\(name)"])]) == [known ? ["id-\(name)"] : []])
            #expect(try await store.alerts(AlertQuery(deviceId: name)).alerts.map(\.id) == (known ? ["alert-\(name)"] : []))
        }
        #expect(try await store.dueMessages(now: t0 + .seconds(100), limit: 10).map(\.id) == names.map { "msg-\($0)" })
    }

    @Test("groups acknowledged but never folded are in the tables after a crash and a restart")
    func crashBeforeFold() async throws {
        let (dir, store) = try await Self.storeWithGroupsABC()
        // Nothing is in the tables yet: the three groups are in the journal only.
        #expect(try await store.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM devices") } == 0)
        let copy = try Self.crashCopy(of: dir)
        try await store.close()

        let reopened = try SQLiteStore(directory: copy)
        try await Self.check(reopened, has: ["a", "b", "c"])
        #expect(try CommitJournalTests.segments(copy).isEmpty, "reopening deletes the segments it wrote into the tables")
        try await reopened.close()
    }

    @Test("a store reopened to commit in the tables first writes what the journal held, and its own groups are in the tables at once")
    func reopenedOnTheTablesPath() async throws {
        let (dir, store) = try await Self.storeWithGroupsABC()
        let copy = try Self.crashCopy(of: dir)
        try await store.close()

        let reopened = try SQLiteStore(directory: copy, commitPath: .tables)
        try await reopened.commit(Self.group("d", at: 3))
        #expect(try await reopened.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM devices") } == 4)
        #expect(try CommitJournalTests.segments(copy).isEmpty, "no journal segment is written on the tables path")
        try await Self.check(reopened, has: ["a", "b", "c", "d"])
        try await reopened.close()
    }

    @Test(
        "a record torn at the journal's end is dropped, with garbage after it; the records before it are kept",
        arguments: [3, 40]
    )
    func tornEnd(cut: Int) async throws {
        let (dir, store) = try await Self.storeWithGroupsABC()
        let copy = try Self.crashCopy(of: dir)
        try await store.close()
        let segment = try #require(try Self.segments(copy).last)
        let handle = try #require(FileHandle(forUpdatingAtPath: copy + "/" + segment))
        let size = try handle.seekToEnd()
        try handle.truncate(atOffset: size - UInt64(cut))
        try handle.seekToEnd()
        handle.write(Data(repeating: 0x5A, count: 100))
        try handle.close()

        let reopened = try SQLiteStore(directory: copy)
        try await Self.check(reopened, has: ["a", "b"], lacks: ["c"])
        // The journal goes on after the records it kept.
        try await reopened.commit(Self.group("d", at: 3))
        let again = try Self.crashCopy(of: copy)
        try await reopened.close()
        let third = try SQLiteStore(directory: again)
        try await Self.check(third, has: ["a", "b", "d"], lacks: ["c"])
        try await third.close()
    }

    @Test("a group already folded is not written again when its segment outlives the fold")
    func foldedRecordNotReplayed() async throws {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir)
        try await store.commit(Self.group("a", at: 0))
        let segmentCopy = try Self.crashCopy(of: dir)
        #expect(try await store.fold() == 1)
        // The message is delivered and leaves the outbox; the device changes after.
        try await store.recordAttempt(
            DeliveryAttempt(
                seq: 0,
                webhookId: "wh-1",
                messageId: "msg-a",
                attempt: 1,
                attemptedAt: t0,
                statusCode: 200,
                error: nil,
                nextRetryAt: nil,
                outcome: .delivered
            ),
            disable: nil
        )
        var later = StoreChanges(recordedAt: t0 + .seconds(5))
        var changed = richRecord("a")
        changed.info.platform = "macOS"
        later.devices = [changed]
        try await store.commit(later)
        #expect(try await store.fold() == 1)
        // A crash between the fold's commit and the segment's deletion leaves the old segment behind.
        let copy = try Self.crashCopy(of: dir)
        try await store.close()
        for name in try Self.segments(segmentCopy) {
            try FileManager.default.copyItem(atPath: segmentCopy + "/" + name, toPath: copy + "/" + name)
        }

        let reopened = try SQLiteStore(directory: copy)
        #expect(try await reopened.dueMessages(now: t0 + .seconds(100), limit: 10).isEmpty, "a delivered message is not sent again")
        #expect(try await reopened.loadState().devices.map(\.info.platform) == ["macOS"], "the device keeps its newer state")
        try await reopened.close()
    }

    @Test("a folded segment is kept as a spare and the next segment overwrites it in place, also after a restart")
    func retiredSegmentIsReused() async throws {
        let (dir, store) = try await Self.storeWithGroupsABC()
        let first = try #require(try Self.segments(dir).first)
        let (inode, size) = try Self.inodeAndSize(dir + "/" + first)
        #expect(try await store.fold() == 3)
        #expect(try Self.segments(dir).isEmpty)
        #expect(try Self.spares(dir).count == 1, "the folded segment is a spare")

        try await store.commit(Self.group("d", at: 3))
        let second = try #require(try Self.segments(dir).first)
        #expect(second != first)
        #expect(try Self.spares(dir).isEmpty, "the spare became the new segment")
        #expect(try Self.inodeAndSize(dir + "/" + second) == (inode, size), "the record overwrote the spare's blocks; the file did not grow")
        try await store.close()

        // Closing folded d: its segment is a spare, which the next run takes for its first segment.
        #expect(try Self.spares(dir).count == 1)
        let reopened = try SQLiteStore(directory: dir)
        try await reopened.commit(Self.group("e", at: 4))
        #expect(try Self.spares(dir).isEmpty)
        #expect(try Self.inodeAndSize(dir + "/" + (try #require(try Self.segments(dir).first))).inode == inode)
        try await reopened.close()
    }

    @Test("after a crash, the records written over a recycled segment come back and the older ones it held do not")
    func recycledSegmentAfterCrash() async throws {
        let (dir, store) = try await Self.storeWithGroupsABC()
        #expect(try await store.fold() == 3)
        // Delivered, the messages of a, b and c leave the outbox: replaying an older record would put one back.
        for name in ["a", "b", "c"] {
            try await store.recordAttempt(
                DeliveryAttempt(
                    seq: 0,
                    webhookId: "wh-1",
                    messageId: "msg-\(name)",
                    attempt: 1,
                    attemptedAt: t0,
                    statusCode: 200,
                    error: nil,
                    nextRetryAt: nil,
                    outcome: .delivered
                ),
                disable: nil
            )
        }
        try await store.commit(Self.group("d", at: 3))
        // The recycled file holds d's record, then b's and c's from before the fold.
        let segment = try #require(try Self.segments(dir).first)
        let records = try CommitJournal.read(directory: dir).records
        #expect(records.count == 1, "reading stops after d")
        let raw = try #require(FileManager.default.contents(atPath: dir + "/" + segment))
        #expect(raw.count > CommitJournal.headerSize + (records.first?.payload.count ?? 0) * 2, "older records follow d's")
        let copy = try Self.crashCopy(of: dir)
        try await store.close()

        let reopened = try SQLiteStore(directory: copy)
        #expect(try await reopened.loadState().devices.map(\.key.deviceId) == ["a", "b", "c", "d"])
        #expect(try await reopened.dueMessages(now: t0 + .seconds(100), limit: 10).map(\.id) == ["msg-d"], "no delivered message comes back")
        try await reopened.close()
    }

    @Test("reading a segment stops at a record whose number is not above the one before it")
    func readingStopsAtAnOlderRecord() throws {
        let dir = temporaryDirectory()
        var bytes: [UInt8] = []
        for seq: Int64 in [7, 8, 3, 9] {
            let payload = Array("group \(seq)".utf8)
            CommitJournal.appendHeader(to: &bytes, seq: seq, payload: payload)
            bytes += payload
        }
        #expect(FileManager.default.createFile(atPath: CommitJournal.path(directory: dir, number: 1), contents: Data(bytes)))
        let contents = try CommitJournal.read(directory: dir)
        #expect(contents.records.map(\.seq) == [7, 8])
        #expect(contents.lastSeq == 8)
    }

    @Test("records are checked by CRC-32 and Adler-32, and 0.1.0's records, checked by SHA-256, are still read")
    func recordFormats() throws {
        // Frozen bytes, computed apart from this code (Python's hashlib and zlib): a record 0.1.0 wrote ("SHJ1"),
        // then one written now ("SHJ2"), each "group N" with sequence number N.
        let v1 = bytes(hex: "53484a310700000005000000000000009f49a6006f5dbb0367726f75702035")
        let v2 = bytes(hex: "53484a32070000000600000000000000ed609eb48a02ab0b67726f75702036")
        var written: [UInt8] = []
        CommitJournal.appendHeader(to: &written, seq: 6, payload: Array("group 6".utf8))
        #expect(written + Array("group 6".utf8) == v2, "the header written now")

        let dir = temporaryDirectory()
        #expect(FileManager.default.createFile(atPath: CommitJournal.path(directory: dir, number: 1), contents: Data(v1 + v2)))
        let contents = try CommitJournal.read(directory: dir)
        #expect(contents.records.map(\.seq) == [5, 6])
        #expect(contents.records.map { String(decoding: $0.payload, as: UTF8.self) } == ["group 5", "group 6"])

        // A byte changed in either payload ends the segment there.
        for (index, record) in [(v1.count - 1, 0), (v1.count + v2.count - 1, 1)] {
            var torn = v1 + v2
            torn[index] ^= 0x01
            let other = temporaryDirectory()
            #expect(FileManager.default.createFile(atPath: CommitJournal.path(directory: other, number: 1), contents: Data(torn)))
            #expect(try CommitJournal.read(directory: other).records.count == record)
        }
    }

    private func bytes(hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = hex.startIndex
        while i < hex.endIndex {
            let next = hex.index(i, offsetBy: 2)
            out.append(UInt8(hex[i..<next], radix: 16) ?? 0)
            i = next
        }
        return out
    }

    @Test("a way onto the journal's queue taken from the queue traps instead of waiting for itself", .timeLimit(.minutes(2)))
    func reentryTraps() async {
        await #expect(processExitsWith: .failure) {
            let journal = CommitJournal(directory: NSTemporaryDirectory(), durable: false, lastNumber: 1 << 40, lastSeq: 0)
            _ = try? await journal.perform { _ in journal.onQueueBlocking {} }
        }
        await #expect(processExitsWith: .failure) {
            let journal = CommitJournal(directory: NSTemporaryDirectory(), durable: false, lastNumber: 1 << 40, lastSeq: 0)
            _ = try? await journal.perform { _ in journal.retire([]) }
        }
        // From off the queue, the same calls run.
        let journal = CommitJournal(directory: temporaryDirectory(), durable: false, lastNumber: 0, lastSeq: 0)
        journal.onQueueBlocking {}
        journal.retire([])
    }

    @Test("an id is never judged new while folds run beside the commits")
    func dedupeDuringFolds() async throws {
        let store = try SQLiteStore(directory: temporaryDirectory(), synchronous: .normal)
        let key = DeviceKey(appId: "app", deviceId: "1")
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while !Task.isCancelled {
                    _ = try await store.fold()
                    await Task.yield()
                }
            }
            // Each group brings a new id and the one before it again: the repeat must always be seen.
            for n in 1...300 {
                let seen = try await store.commit(claiming: [(key: key, eventIds: ["e\(n - 1)", "e\(n)"])], at: seconds(Int64(n))) { seen in
                    var changes = StoreChanges(recordedAt: seconds(Int64(n)))
                    changes.devices = [DeviceRecord(key: key, info: DeviceInfo(), firstSeenAt: t0)]
                    return (changes, seen[0])
                }
                #expect(seen == (n == 1 ? [] : ["e\(n - 1)"]), "group \(n)")
            }
            group.cancelAll()
        }
        try await store.close()
    }

    @Test("a fold that fails is logged once and retried; once it works again the backlog drains and the recovery is logged")
    func failingFoldIsVisibleAndRetried() async throws {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir, synchronous: .normal)
        let log = CapturedLog()
        let metrics = TestMetrics()
        let maintenance = SQLiteMaintenance(
            store: store,
            logger: Logger(label: "test") { _ in CapturedLog.Handler(log: log) },
            niceness: SQLiteMaintenance.defaultNiceness,
            metrics: metrics
        )
        // The fold writes the devices table on the writer's connection: a trigger there fails every fold, and
        // leaves the readers that judge claims alone.
        try await store.pool.write { db in
            try db.execute(
                sql: "CREATE TEMP TRIGGER block_folds BEFORE INSERT ON main.devices BEGIN SELECT RAISE(ABORT, 'folds blocked'); END"
            )
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await maintenance.run() }
            try await store.commit(Self.group("a", at: 0))
            // Folds are due a second after the commit and retried every 50 ms: three failures in a row.
            try await Self.waitUntil {
                ((try? metrics.expectCounter("synchealth_store_fold_failures_total").totalValue) ?? 0) >= 3
            }
            #expect(store.backlog.withLock { $0.entries.count } == 1)
            #expect(log.messages == ["error: Folding the journal into the tables failed; retrying"], "one line for a run of failures")
            #expect(try Self.segments(dir).count == 1, "the group stays in the journal")

            try await store.pool.write { db in try db.execute(sql: "DROP TRIGGER temp.block_folds") }
            // The backlog drains inside the fold, and the recovery is logged after the fold returns.
            try await Self.waitUntil { store.backlog.withLock { $0.entries.isEmpty } && log.messages.count >= 2 }
            #expect(log.messages.last == "notice: Folding the journal into the tables works again")
            #expect(log.lineMetadata.last?["fold.failures"].map { Int("\($0)") ?? 0 } ?? 0 >= 3)
            group.cancelAll()
        }
        try await Self.check(store, has: ["a"])
        try await store.close()
    }

    @Test("what the fold takes back from the journal's queue is freed on the fold's thread, never on the queue's")
    func handedBackValuesAreFreedByTheTaker() async throws {
        let (_, store) = try await Self.storeWithGroupsABC()
        let freedOnQueue = FreedOnQueue()
        for _ in 0..<2_000 {
            let value = store.withBacklog(politely: true, empty: nil as QueueSentinel?) { _ in QueueSentinel(freedOnQueue) }
            withExtendedLifetime(value) {}
        }
        store.journal.onQueueBlocking {}
        #expect(freedOnQueue.count.load(ordering: .relaxed) == 0)
        try await store.close()
    }

    @Test("the maintenance service folds on a thread of its own, whose nice value it raises by its niceness")
    func maintenanceFoldsOnALowerPriorityThread() async throws {
        let store = try SQLiteStore(directory: temporaryDirectory(), synchronous: .normal)
        let maintenance = store.maintenance(logger: Logger(label: "test"), niceness: 7)
        // Swift's concurrency pool runs at the process's priority; the service's thread starts from there.
        errno = 0
        let lowered = min(19, Int(getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)) + 7)
        #expect(errno == 0)
        #expect(!Self.threadNiceValues().contains(lowered))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await maintenance.run() }
            try await store.commit(Self.group("a", at: 0))
            try await Self.waitUntil { store.backlog.withLock { $0.entries.isEmpty } }
            #expect(Self.threadNiceValues().contains(lowered), "the thread that folded")
            group.cancelAll()
        }
        try await Self.check(store, has: ["a"])
        try await store.close()
    }

    /// The nice value of each of this process's threads (Linux: field 19 of `/proc/self/task/<tid>/stat`).
    static func threadNiceValues() -> [Int] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { task in
            guard let stat = try? String(contentsOfFile: "/proc/self/task/\(task)/stat", encoding: .utf8),
                let fields = stat.split(separator: ")").last?.split(separator: " "), fields.count > 16
            else { return nil }
            return Int(fields[16])
        }
    }

    @Test("a journal write or sync that fails is cut off again: its group is refused and never applied, and the groups after it are kept")
    func failedWriteIsCutOff() async throws {
        let disk = FaultyDisk()
        let (dir, store) = try await Self.storeWithGroupA(on: disk)
        disk.faults.withLock { $0.writes = 1 }
        await #expect(throws: StoreError.self) { try await store.commit(Self.group("b", at: 1)) }
        try await store.commit(Self.group("c", at: 2))
        disk.faults.withLock { $0.syncs = 1 }
        await #expect(throws: StoreError.self) { try await store.commit(Self.group("d", at: 3)) }
        // A crash right after the refusal: the whole record of `d` reached the file before its sync failed,
        // and it must not come back at the next start.
        let refusedLast = try Self.crashCopy(of: dir)
        try await store.commit(Self.group("e", at: 4))
        #expect(disk.faults.withLock { $0.writes + $0.syncs } == 0, "both faults were hit")
        let copy = try Self.crashCopy(of: dir)
        try await store.close()

        let reopened = try SQLiteStore(directory: copy)
        try await Self.check(reopened, has: ["a", "c", "e"], lacks: ["b", "d"])
        try await reopened.close()
        let crashed = try SQLiteStore(directory: refusedLast)
        try await Self.check(crashed, has: ["a", "c"], lacks: ["b", "d"])
        try await crashed.close()
    }

    @Test("a failed write that cannot be cut off refuses every later commit; reopening keeps the groups before it and works again")
    func uncutWriteRefusesLaterCommits() async throws {
        let disk = FaultyDisk()
        let (dir, store) = try await Self.storeWithGroupA(on: disk)
        disk.faults.withLock {
            $0.writes = 1
            $0.truncates = 1
        }
        await #expect(throws: StoreError.self) { try await store.commit(Self.group("b", at: 1)) }
        // The half-written record stays in the file: anything written after it would be lost at the next start.
        do {
            try await store.commit(Self.group("c", at: 2))
            Issue.record("a commit after an uncut failed write was accepted")
        } catch let error as StoreError {
            #expect("\(error)".contains("cannot undo a failed journal write"))
        }
        try await store.close()

        let reopened = try SQLiteStore(directory: dir)
        try await Self.check(reopened, has: ["a"], lacks: ["b", "c"])
        try await reopened.commit(Self.group("d", at: 3))
        try await reopened.close()
        let again = try SQLiteStore(directory: dir)
        try await Self.check(again, has: ["a", "d"])
        try await again.close()
    }

    /// A new durable store with groups "a", "b" and "c" committed (in the journal only: nothing folds them).
    static func storeWithGroupsABC() async throws -> (dir: String, store: SQLiteStore) {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir)
        for (i, name) in ["a", "b", "c"].enumerated() { try await store.commit(group(name, at: Int64(i))) }
        return (dir, store)
    }

    /// A new durable store whose journal writes through `disk`, with group "a" committed.
    static func storeWithGroupA(on disk: FaultyDisk) async throws -> (dir: String, store: SQLiteStore) {
        let dir = temporaryDirectory()
        let store = try SQLiteStore(directory: dir, synchronous: .full, journalIO: disk.io)
        try await store.commit(group("a", at: 0))
        return (dir, store)
    }

    static func waitUntil(_ condition: () throws -> Bool) async throws {
        // A liveness bound (30 s), not a speed target: the maintenance thread runs at a lowered priority.
        #expect(try await eventually(tries: 1_500, every: .milliseconds(20)) { try condition() })
    }

    static func segments(_ dir: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasPrefix(CommitJournal.prefix) }.sorted()
    }

    static func spares(_ dir: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasPrefix(CommitJournal.sparePrefix) }.sorted()
    }

    static func inodeAndSize(_ path: String) throws -> (inode: UInt64, size: Int) {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return ((attributes[.systemFileNumber] as? NSNumber)?.uint64Value ?? 0, (attributes[.size] as? NSNumber)?.intValue ?? -1)
    }
}

/// What a `CapturedLog.Handler` was given: "level: message", and the metadata of each line.
final class CapturedLog: Sendable {
    fileprivate let lines = Mutex<[(String, Logger.Metadata)]>([])
    var messages: [String] { lines.withLock { $0.map(\.0) } }
    var lineMetadata: [Logger.Metadata] { lines.withLock { $0.map(\.1) } }

    /// A handler that appends to `log`.
    struct Handler: LogHandler {
        let log: CapturedLog
        var logLevel: Logger.Level = .trace
        var metadata: Logger.Metadata = [:]
        var metadataProvider: Logger.MetadataProvider?

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            log.lines.withLock { $0.append(("\(event.level): \(event.message)", event.metadata ?? [:])) }
        }
    }
}

/// Journal system calls that fail on demand: a failing write lands half its bytes first (a torn record), then
/// reports `ENOSPC`; a failing sync or truncate reports `EIO`.
final class FaultyDisk: Sendable {
    struct Faults {
        /// How many of the next writes, syncs and truncates fail.
        var writes = 0, syncs = 0, truncates = 0
    }

    let faults = Mutex(Faults())

    /// Whether the next call of a kind fails, counting it off.
    func takeFault(_ kind: WritableKeyPath<Faults, Int>) -> Bool {
        faults.withLock { f in
            defer { f[keyPath: kind] = max(0, f[keyPath: kind] - 1) }
            return f[keyPath: kind] > 0
        }
    }

    var io: JournalIO {
        JournalIO(
            write: { fd, buffer, count, offset in
                guard self.takeFault(\.writes) else { return pwrite(fd, buffer, count, offset) }
                _ = pwrite(fd, buffer, count / 2, offset)
                errno = ENOSPC
                return -1
            },
            sync: { fd in
                guard self.takeFault(\.syncs) else { return fdatasync(fd) }
                errno = EIO
                return -1
            },
            truncate: { fd, length in
                guard self.takeFault(\.truncates) else { return ftruncate(fd, length) }
                errno = EIO
                return -1
            }
        )
    }
}

/// Counts the `QueueSentinel`s freed on the thread that made them (the journal queue's).
final class FreedOnQueue: Sendable {
    let count = Atomic<Int>(0)
}

/// Made on the journal's queue; notes when it is freed there.
final class QueueSentinel: Sendable {
    let madeOn = pthread_self()
    let freed: FreedOnQueue

    init(_ freed: FreedOnQueue) { self.freed = freed }

    deinit {
        if pthread_equal(pthread_self(), madeOn) != 0 { freed.count.add(1, ordering: .relaxed) }
    }
}
