import Foundation

/// The events `record` has returned for that the queue does not hold yet, on disk.
///
/// `record` appends one line (`<eventId> <event JSON>`, as in the queue's log) before it returns, under the
/// reporter's lock: one small write, no `fsync`, so the event survives the process being killed (the kernel holds
/// the bytes), which is what an app is: suspended, killed, crashed, quit. `DeliveryAgent` moves the events into
/// the queue, then rewrites this file with what `record` added meanwhile, under the same lock. On the next start
/// the agent takes the lines the queue does not hold (a kill came before the move or before the rewrite).
///
/// Not thread-safe: it lives in the reporter's locked state.
final class InboxLog {
    /// The file's name in the storage directory.
    static let fileName = "inbox.log"

    private let url: URL
    private let beforeWrite: (@Sendable () throws -> Void)?
    private var handle: FileHandle?

    init(directory: URL, beforeWrite: (@Sendable () throws -> Void)?) {
        url = directory.appendingPathComponent(Self.fileName)
        self.beforeWrite = beforeWrite
    }

    deinit { try? handle?.close() }

    /// Appends one event. A failure (a full disk, a directory that cannot be made) leaves the event in memory
    /// only, as before the log existed: the caller keeps it in the inbox either way.
    func append(id: String, json: String) throws {
        let handle = try open()
        try beforeWrite?()
        let length = try handle.offset()
        do {
            try handle.write(contentsOf: Data((id + " " + json + "\n").utf8))
        } catch {
            // No part of a line may stay, to be joined to the next one.
            try? handle.truncate(atOffset: length)
            throw error
        }
    }

    /// Replaces the file's lines with `entries`: the events still in the inbox once the rest are in the queue. The
    /// new lines go to a file of their own that takes the log's name in one step: a kill while the file was
    /// truncated and rewritten in place lost the lines of events whose `record` had returned.
    func replace(with entries: [EventQueue.Entry]) throws {
        var text = ""
        for entry in entries { text += entry.id + " " + entry.json + "\n" }
        try beforeWrite?()
        // The next append opens the new file.
        close()
        try StorageFiles.write(Data(text.utf8), to: url)
    }

    func close() {
        try? handle?.close()
        handle = nil
    }

    private func open() throws -> FileHandle {
        if let handle { return handle }
        let directory = url.deletingLastPathComponent()
        try StorageFiles.makeDirectory(directory)
        guard StorageFiles.makeFileIfAbsent(url) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path])
        }
        let opened = try FileHandle(forWritingTo: url)
        try opened.seekToEnd()
        handle = opened
        return opened
    }

    /// The complete lines of the log in `directory` (a line a kill cut short is left out).
    static func read(directory: URL) -> [EventQueue.Entry] {
        guard let data = try? Data(contentsOf: directory.appendingPathComponent(fileName)) else { return [] }
        var entries: [EventQueue.Entry] = []
        var start = data.startIndex
        while let newline = data[start...].firstIndex(of: UInt8(ascii: "\n")) {
            let line = data[start..<newline]
            start = newline + 1
            guard let space = line.firstIndex(of: UInt8(ascii: " ")) else { continue }
            entries.append(
                EventQueue.Entry(id: String(decoding: line[..<space], as: UTF8.self), json: String(decoding: line[(space + 1)...], as: UTF8.self))
            )
        }
        return entries
    }
}
