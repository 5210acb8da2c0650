import Foundation

/// The on-disk queue of events not yet acknowledged by the server.
///
/// Events are appended to `events.log`, one line each (`<eventId> <event JSON>`), before any attempt to send
/// them. A `202` acknowledges a prefix of the queue: the id of its last event is written to `acknowledged`
/// (atomically, by rename). On open, lines up to that id are skipped, so a kill at any point loses nothing
/// acknowledged-or-not: at worst a batch is sent again, and the server counts it as duplicates. Ids only grow
/// (`EventIdGenerator`), so "up to that id" is a string comparison. The log is rewritten without the
/// acknowledged lines once they make up most of it.
///
/// Not thread-safe: one actor (`DeliveryAgent`) owns it.
final class EventQueue {
    /// One queued event.
    struct Entry: Equatable {
        var id: String
        var json: String
        /// Its size in the log, newline included.
        var size: Int { id.utf8.count + json.utf8.count + 2 }
    }

    /// How many events and bytes the queue keeps at most.
    struct Limits: Sendable, Equatable {
        var maxEvents: Int
        var maxBytes: Int
    }

    let directory: URL
    let limits: Limits
    private(set) var entries: [Entry] = []
    private var head = 0
    private(set) var bytes = 0
    /// Events dropped because the queue was full, since it was opened.
    private(set) var droppedCount = 0
    /// The last id acknowledged (or dropped).
    private(set) var acknowledgedId: String?
    /// The largest id ever stored here, acknowledged or not.
    private(set) var lastId: String?
    private var handle: FileHandle
    /// Runs before each append; a test's stand-in throws to play a full disk.
    private let beforeWrite: (@Sendable () throws -> Void)?
    /// Bytes of the log file that belong to acknowledged lines.
    private var deadBytes = 0

    /// The files the queue keeps in its directory.
    static let fileNames = ["events.log", "acknowledged"]

    private var logURL: URL { directory.appendingPathComponent("events.log") }
    private var acknowledgedURL: URL { directory.appendingPathComponent("acknowledged") }

    /// Opens (or creates) the queue in `directory`, dropping a last line that a kill cut short.
    init(directory: URL, limits: Limits, beforeWrite: (@Sendable () throws -> Void)? = nil) throws {
        self.directory = directory
        self.limits = limits
        self.beforeWrite = beforeWrite
        try StorageFiles.makeDirectory(directory)
        let ackURL = directory.appendingPathComponent("acknowledged")
        // Unreadable is not absent: taken as absent, every acknowledged event would be sent again.
        acknowledgedId = try StorageFiles.readIfPresent(ackURL).map {
            String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        .flatMap { $0.isEmpty ? nil : $0 }
        lastId = acknowledgedId
        let logURL = directory.appendingPathComponent("events.log")
        _ = StorageFiles.makeFileIfAbsent(logURL)
        let data = try Data(contentsOf: logURL)
        var kept = 0  // bytes of complete lines
        var start = data.startIndex
        while let newline = data[start...].firstIndex(of: UInt8(ascii: "\n")) {
            let line = data[start..<newline]
            kept = newline + 1 - data.startIndex
            start = newline + 1
            guard let space = line.firstIndex(of: UInt8(ascii: " ")) else {
                deadBytes += line.count + 1
                continue
            }
            let id = String(decoding: line[..<space], as: UTF8.self)
            let json = String(decoding: line[(space + 1)...], as: UTF8.self)
            if let last = lastId, id <= last {
                deadBytes += line.count + 1
                continue
            }
            lastId = id
            entries.append(Entry(id: id, json: json))
            bytes += line.count + 1
        }
        handle = try FileHandle(forWritingTo: logURL)
        if kept < data.count { try handle.truncate(atOffset: UInt64(kept)) }
        try handle.seekToEnd()
    }

    deinit { try? handle.close() }

    /// The largest event id stored in `directory`: acknowledged, queued or in the inbox log, read from the ends of
    /// the files only. The reporter's ids start above it, so that an inbox line at or below the queue's last id is
    /// one the queue took already (its rewrite failed), never a new event: `DeliveryAgent` drops such a line
    /// instead of sending it again under a new id.
    static func lastStoredId(in directory: URL) -> String? {
        var ids: [String] = []
        if let acknowledged = try? String(contentsOf: directory.appendingPathComponent("acknowledged"), encoding: .utf8) {
            ids.append(acknowledged.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        for name in ["events.log", InboxLog.fileName] {
            guard let handle = try? FileHandle(forReadingFrom: directory.appendingPathComponent(name)) else { continue }
            defer { try? handle.close() }
            guard let size = try? handle.seekToEnd() else { continue }
            let start = size > 8192 ? size - 8192 : 0
            guard (try? handle.seek(toOffset: start)) != nil, let tail = try? handle.readToEnd() else { continue }
            var lines = tail.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropLast()
            if start > 0 { lines = lines.dropFirst() }  // cut at the start of the window
            for line in lines {
                guard let space = line.firstIndex(of: UInt8(ascii: " ")) else { continue }
                ids.append(String(decoding: line[..<space], as: UTF8.self))
            }
        }
        return ids.filter { !$0.isEmpty }.max()
    }

    /// The events not yet acknowledged, oldest first.
    var pending: ArraySlice<Entry> { entries[head...] }

    var isEmpty: Bool { head == entries.count }
    var count: Int { entries.count - head }

    /// Appends events (ids larger than any stored), then drops the oldest while the queue is over its limits.
    /// Returns how many were dropped. A failed write leaves the queue as it was: the file is cut back to its
    /// length before, so that no part of a line stays to be joined to the next append.
    @discardableResult
    func append(_ new: [Entry]) throws -> Int {
        guard !new.isEmpty else { return 0 }
        var text = ""
        for entry in new { text += entry.id + " " + entry.json + "\n" }
        let length = try handle.offset()
        do {
            try beforeWrite?()
            try handle.write(contentsOf: Data(text.utf8))
        } catch {
            try? handle.truncate(atOffset: length)
            throw error
        }
        entries += new
        bytes += new.reduce(0) { $0 + $1.size }
        lastId = new.last?.id
        var dropped = 0
        while count > 0, count > limits.maxEvents || bytes > limits.maxBytes {
            bytes -= entries[head].size
            deadBytes += entries[head].size
            head += 1
            dropped += 1
        }
        if dropped > 0 {
            droppedCount += dropped
            try writeAcknowledged(entries[head - 1].id)
            try compactIfWorthIt()
        }
        return dropped
    }

    /// Forces the log to stable storage (before it is sent, so that nothing sent can be lost by a power cut).
    func synchronize() throws {
        try handle.synchronize()
    }

    /// Removes the first `n` pending events: the server acknowledged them (or refused them for good).
    func acknowledge(_ n: Int) throws {
        let n = min(n, count)
        guard n > 0 else { return }
        let removed = entries[head..<(head + n)].reduce(0) { $0 + $1.size }
        head += n
        bytes -= removed
        deadBytes += removed
        try writeAcknowledged(entries[head - 1].id)
        try compactIfWorthIt()
    }

    private func writeAcknowledged(_ id: String) throws {
        try StorageFiles.write(Data(id.utf8), to: acknowledgedURL)
        acknowledgedId = id
    }

    /// Rewrites the log without its acknowledged lines once they are most of it. The acknowledged id stays
    /// valid either way, so a kill during the rewrite loses nothing.
    private func compactIfWorthIt() throws {
        guard deadBytes > 64 * 1024 || (isEmpty && deadBytes > 0) else { return }
        guard deadBytes >= bytes else { return }
        let remaining = Array(entries[head...])
        var text = ""
        for entry in remaining { text += entry.id + " " + entry.json + "\n" }
        try StorageFiles.write(Data(text.utf8), to: logURL)
        try? handle.close()
        handle = try FileHandle(forWritingTo: logURL)
        try handle.seekToEnd()
        entries = remaining
        head = 0
        deadBytes = 0
    }
}
