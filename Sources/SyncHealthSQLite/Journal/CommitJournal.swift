import CZlib
import Crypto
import Dispatch
import Foundation
import SyncHealthStore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The embedded store's commit journal: an append-only file that a group's changes reach before they are
/// acknowledged, one sequential record per group.
///
/// Writing a group straight into SQLite's tables rewrites kilobytes of B-tree pages for a small event (WAL frames,
/// then the checkpoint's copy); a journal record is the group's bytes and nothing else, and `SQLiteStore` folds the
/// journal into the tables later, many groups in one transaction, so each page is rewritten once for many events
/// (docs/architecture.md#the-commit-journal).
///
/// Records live in numbered segment files (`synchealth-journal-<n>`). A fold seals the active segment, and a
/// segment is retired once every record in it is in the tables. Each record is a 24-byte header (magic, payload
/// length, sequence number, a check of the sequence number and the payload) and the payload. The check is zlib's
/// CRC-32 and Adler-32 (magic `SHJ2`); records 0.1.0 wrote (magic `SHJ1`) carry the first 8 bytes of a SHA-256
/// instead, a large share of a single event's cost (docs/architecture.md, "The cost of a request"), and are still
/// read. Reading a segment stops at the first record that does not check out, or whose sequence number is not
/// above the one before it: a torn write at a crash is a short or mismatched record at a segment's end, and what
/// follows the last record of a recycled file is the older records it held before. A write or sync that fails is
/// cut off the file again (and the cut synced) before the next write: its group was refused, so it must not come
/// back at the next start, and no acknowledged record may sit behind a bad one. If the cut fails too, the journal
/// refuses every later write until the store is reopened (`CommitJournalTests` makes each of these fail).
///
/// A retired segment is kept as a spare (`synchealth-spare-journal-<n>`, at most `maxSpares` of at most
/// `maxSpareBytes`) and renamed to the next segment's name when one is needed, so that records overwrite blocks
/// the file already has. `fdatasync` after a write that grows a file must also write the inode (its size); after
/// one within the file it writes the data alone, which is cheaper. Its older records never come back: they are all
/// at or below the fold that retired the segment, and a store replays only what is above its last fold.
///
/// All file work runs on one serial queue, off Swift's concurrency pool: `fdatasync` blocks for a millisecond.
final class CommitJournal: @unchecked Sendable {
    /// One segment file.
    struct Segment {
        var number: Int
        var descriptor: Int32 = -1
        var offset = 0
        /// The highest sequence number in the segment, 0 while it is empty.
        var lastSeq: Int64 = 0
    }

    static let prefix = "synchealth-journal-"
    static let sparePrefix = "synchealth-spare-journal-"
    /// Retired segments kept for reuse: a fold retires about one a second.
    static let maxSpares = 2
    /// A retired segment larger than this (a backlog that grew while folds failed or fell behind) is deleted.
    static let maxSpareBytes = 16 << 20
    static let headerSize = 24
    /// `SHJ2`: a record checked by CRC-32 and Adler-32, the one written.
    static let magic: UInt32 = 0x324A_4853
    /// `SHJ1`: a record checked by SHA-256, as 0.1.0 wrote them; read only.
    static let magicSHA256: UInt32 = 0x314A_4853

    let directory: String
    /// Whether each append is on disk (`fdatasync`) before it returns.
    let durable: Bool
    /// The system calls that write, sync and cut the active file; tests make them fail.
    let io: JournalIO
    private let queue = DispatchQueue(label: "synchealth.journal")
    // Everything below is touched only on `queue`: each function that touches it checks it runs there
    // (`onQueueOnly`), and each way onto the queue checks it does not run there already (`notOnQueue`), where it
    // would wait for itself.
    private var active: Segment
    private var sealed: [Segment] = []
    /// Paths of retired segments, for `create` to reuse.
    private var spares: [String]
    private var nextSeq: Int64
    private var failure: String?

    /// A journal that writes its next segment after `lastNumber` and numbers records after `lastSeq`, reusing
    /// the spares a previous run left in `directory`.
    init(directory: String, durable: Bool, lastNumber: Int, lastSeq: Int64, io: JournalIO = .system) {
        self.directory = directory
        self.durable = durable
        self.io = io
        active = Segment(number: lastNumber + 1)
        nextSeq = lastSeq + 1
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        spares = names.filter { $0.hasPrefix(Self.sparePrefix) }.sorted().map { (directory as NSString).appendingPathComponent($0) }
    }

    func path(_ number: Int) -> String {
        Self.path(directory: directory, number: number)
    }

    /// The file of segment `number` in `directory`.
    static func path(directory: String, number: Int) -> String {
        (directory as NSString).appendingPathComponent(prefix + String(format: "%012d", number))
    }

    /// The spare that segment `number` becomes once retired.
    func sparePath(_ number: Int) -> String {
        (directory as NSString).appendingPathComponent(Self.sparePrefix + String(format: "%012d", number))
    }

    /// Appends records from inside `perform`: the only way to reach the file while on the journal's queue.
    struct Appender {
        fileprivate let journal: CommitJournal

        /// Appends one record and returns its sequence number; on return it is on disk (when `durable`).
        func append(_ payload: [UInt8]) throws -> Int64 {
            try journal.write(payload)
        }
    }

    /// Runs `body` on the journal's queue, after everything enqueued before it and before anything enqueued after.
    ///
    /// A series of commits reads, plans and appends in one `perform` (`SQLiteStore.commitSeries`): one trip to the
    /// queue's thread and back for as many groups as wait. Each trip waits for a thread to be woken and scheduled,
    /// and on two busy cores that wait was a third of a group's time. `body` may block on SQLite: it runs off
    /// Swift's concurrency pool.
    func perform<T: Sendable>(_ body: @escaping @Sendable (Appender) throws -> T) async throws -> T {
        notOnQueue()
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            queue.async {
                continuation.resume(with: Result { try body(Appender(journal: self)) })
            }
        }
    }

    private func write(_ payload: [UInt8]) throws -> Int64 {
        onQueueOnly()
        if let failure { throw StoreError.unavailable(path: directory, reason: failure) }
        if active.descriptor < 0 { try create(&active) }
        let seq = nextSeq
        nextSeq += 1
        var record = [UInt8]()
        record.reserveCapacity(Self.headerSize + payload.count)
        Self.appendHeader(to: &record, seq: seq, payload: payload)
        record += payload
        let start = active.offset
        var done = 0
        var error: Int32 = 0
        record.withUnsafeBytes { buffer in
            while done < buffer.count {
                let n = io.write(active.descriptor, buffer.baseAddress.map { $0 + done }, buffer.count - done, off_t(start + done))
                if n < 0 {
                    if errno == EINTR { continue }
                    error = errno
                    return
                }
                done += n
            }
        }
        if error == 0, durable, io.sync(active.descriptor) != 0 { error = errno }
        guard error == 0 else {
            // Cut the record off again, so that the next one follows the last good one.
            if io.truncate(active.descriptor, off_t(start)) != 0 || io.sync(active.descriptor) != 0 {
                failure = "cannot undo a failed journal write (\(String(cString: strerror(errno))))"
            }
            throw StoreError.unavailable(path: directory, reason: "cannot write the journal (\(String(cString: strerror(error))))")
        }
        active.offset = start + record.count
        active.lastSeq = seq
        return seq
    }

    /// Opens the file of a new segment: a spare renamed to its name when there is one, else a new file.
    private func create(_ segment: inout Segment) throws {
        onQueueOnly()
        var fd: Int32 = -1
        while fd < 0, let spare = spares.popLast() {
            if rename(spare, path(segment.number)) == 0 {
                fd = openFile(path(segment.number), O_WRONLY | O_CLOEXEC)
            } else {
                _ = unlink(spare)
            }
        }
        if fd < 0 { fd = openFile(path(segment.number), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC) }
        guard fd >= 0 else {
            throw StoreError.unavailable(path: directory, reason: "cannot create \(path(segment.number)) (\(String(cString: strerror(errno))))")
        }
        // The new file's name (or the spare's new name) must be on disk before a record in it is acknowledged.
        let dir = openFile(directory, O_RDONLY | O_CLOEXEC)
        if dir >= 0 {
            _ = fsync(dir)
            closeDescriptor(dir)
        }
        segment.descriptor = fd
    }

    /// Ends the active segment: later records go to a new one.
    func seal() async {
        await onQueue { self.sealOnQueue() }
    }

    /// `seal()`, blocking the calling thread until it is done.
    func sealBlocking() {
        onQueueBlocking { self.sealOnQueue() }
    }

    /// Retires the sealed segments whose records are all at or below `seq` (they are in the tables).
    func discard(through seq: Int64) async {
        await onQueue { self.discardOnQueue(through: seq) }
    }

    /// `discard(through:)`, blocking the calling thread until it is done.
    func discardBlocking(through seq: Int64) {
        onQueueBlocking { self.discardOnQueue(through: seq) }
    }

    /// Runs `body` on the queue's own thread and blocks the calling thread until it is done.
    ///
    /// Not `queue.sync`, which runs `body` on the calling thread: the maintenance service calls this from a thread
    /// of low priority, and a commit waiting for the queue must not wait for that thread to be scheduled again.
    func onQueueBlocking(_ body: @escaping @Sendable () -> Void) {
        notOnQueue()
        let done = DispatchSemaphore(value: 0)
        queue.async {
            body()
            done.signal()
        }
        done.wait()
    }

    /// Runs `body` on the queue and waits for it without blocking a thread of Swift's concurrency pool.
    private func onQueue(_ body: @escaping @Sendable () -> Void) async {
        notOnQueue()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                body()
                continuation.resume()
            }
        }
    }

    private func sealOnQueue() {
        onQueueOnly()
        guard active.descriptor >= 0 else { return }
        closeDescriptor(active.descriptor)
        active.descriptor = -1
        sealed.append(active)
        active = Segment(number: active.number + 1)
    }

    private func discardOnQueue(through seq: Int64) {
        onQueueOnly()
        sealed.removeAll { segment in
            guard segment.lastSeq <= seq else { return false }
            retireOnQueue(segment.number)
            return true
        }
    }

    /// Retires segments that a store wrote into the tables when it opened (none is active yet).
    func retire(_ numbers: [Int]) {
        notOnQueue()
        queue.sync { for number in numbers { retireOnQueue(number) } }
    }

    /// Keeps segment `number` as a spare, or deletes it when there are enough spares or it is too large.
    private func retireOnQueue(_ number: Int) {
        onQueueOnly()
        var info = stat()
        if spares.count < Self.maxSpares, stat(path(number), &info) == 0, Int(info.st_size) <= Self.maxSpareBytes,
            rename(path(number), sparePath(number)) == 0
        {
            spares.append(sparePath(number))
        } else {
            _ = unlink(path(number))
        }
    }

    /// Seals the active segment and refuses later appends.
    func close() {
        notOnQueue()
        queue.sync {
            if active.descriptor >= 0 {
                closeDescriptor(active.descriptor)
                active.descriptor = -1
                sealed.append(active)
            }
            failure = "the store is closed"
        }
    }

    /// Traps unless on `queue`: the journal's state is the queue's alone.
    private func onQueueOnly() {
        dispatchPrecondition(condition: .onQueue(queue))
    }

    /// Traps on `queue`: a way onto the queue taken from it would wait for itself for ever.
    private func notOnQueue() {
        dispatchPrecondition(condition: .notOnQueue(queue))
    }

    static func appendHeader(to record: inout [UInt8], seq: Int64, payload: [UInt8]) {
        withUnsafeBytes(of: magic.littleEndian) { record.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(payload.count).littleEndian) { record.append(contentsOf: $0) }
        withUnsafeBytes(of: seq.littleEndian) { record.append(contentsOf: $0) }
        withUnsafeBytes(of: check(seq: seq, payload: payload[...]).littleEndian) { record.append(contentsOf: $0) }
    }

    /// The check of a record written now (`magic`).
    static func check(seq: Int64, payload: ArraySlice<UInt8>) -> UInt64 {
        withUnsafeBytes(of: seq.littleEndian) { seqBytes in
            payload.withUnsafeBytes { bytes in
                guard let seqBase = seqBytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return 0 }
                // An empty payload may have no address; zlib reads none of it then.
                let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? seqBase
                return czlib_record_check(seqBase, base, bytes.count)
            }
        }
    }

    /// The check of a record 0.1.0 wrote (`magicSHA256`): the first 8 bytes of the SHA-256, read as a little-endian
    /// number so that both checks compare alike.
    static func checkSHA256(seq: Int64, payload: ArraySlice<UInt8>) -> UInt64 {
        var hash = SHA256()
        withUnsafeBytes(of: seq.littleEndian) { hash.update(bufferPointer: $0) }
        payload.withUnsafeBytes { hash.update(bufferPointer: $0) }
        return hash.finalize().prefix(8).reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// What a data directory's journal holds: every good record of every segment, and the numbers to go on from.
    struct Contents {
        var records: [(seq: Int64, payload: [UInt8])] = []
        var segments: [Int] = []
        var lastSeq: Int64 = 0
    }

    /// Reads every segment in `directory`, each up to its first record that does not check out.
    static func read(directory: String) throws -> Contents {
        var contents = Contents()
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        contents.segments = names.compactMap { $0.hasPrefix(prefix) ? Int($0.dropFirst(prefix.count)) : nil }.sorted()
        for number in contents.segments {
            let file = path(directory: directory, number: number)
            guard let data = FileManager.default.contents(atPath: file) else {
                throw StoreError.unavailable(path: directory, reason: "cannot read \(file)")
            }
            let bytes = [UInt8](data)
            var at = 0
            var previous: Int64 = .min
            while at + headerSize <= bytes.count {
                func u32(_ i: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(bytes[i + $1]) << (8 * UInt32($1)) } }
                func u64(_ i: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(bytes[i + $1]) << (8 * UInt64($1)) } }
                let recordMagic = u32(at)
                guard recordMagic == magic || recordMagic == magicSHA256 else { break }
                let length = Int(u32(at + 4))
                let seq = Int64(bitPattern: u64(at + 8))
                // A recycled file's older records follow its last new one: their numbers are lower.
                guard seq > previous, at + headerSize + length <= bytes.count else { break }
                let payload = bytes[(at + headerSize)..<(at + headerSize + length)]
                let expected = recordMagic == magic ? check(seq: seq, payload: payload) : checkSHA256(seq: seq, payload: payload)
                guard expected == u64(at + 16) else { break }
                contents.records.append((seq, Array(payload)))
                contents.lastSeq = max(contents.lastSeq, seq)
                previous = seq
                at += headerSize + length
            }
        }
        contents.records.sort { $0.seq < $1.seq }
        return contents
    }
}

/// `open(2)` (the journal's own `close()` shadows the C functions inside the class).
private func openFile(_ path: String, _ flags: Int32) -> Int32 {
    open(path, flags, 0o600)
}
