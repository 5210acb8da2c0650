import Foundation
import SyncHealthEngineTesting
import SyncHealthTestSupport
import Testing

@testable import SyncHealthSQLite
@testable import SyncHealthStore

/// The pacer that starts the SQLite files' writeback while a fold or a checkpoint writes them.
@Suite("Writeback pacer")
struct WritebackPacerTests {
    @Test("while its body runs the pacer starts writeback every interval, without a refusal, and stops after")
    func pacesOnlyWhileItsBodyRuns() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/data"
        try Data(count: 1 << 20).write(to: URL(fileURLWithPath: file))
        let files = WritebackFiles(paths: [file, dir + "/missing"])
        defer { files.close() }
        let pacer = WritebackPacer(files: files, intervalMicroseconds: 2_000)
        let during = try await pacer.during {
            try await Task.sleep(for: .milliseconds(100))
            return pacer.rounds
        }
        #expect(during >= 5)
        #expect(pacer.refusals == 0, "sync_file_range accepted every start")
        try await Task.sleep(for: .milliseconds(50))
        let stopped = pacer.rounds
        try await Task.sleep(for: .milliseconds(50))
        #expect(pacer.rounds == stopped, "no round after the body returned")
        await pacer.shutdown()
    }

    /// Dirty pages stay in memory for up to 30 s before the kernel writes them back by itself
    /// (`vm.dirty_expire_centisecs`); the pacer sends them to the disk within milliseconds.
    @Test("pages written without an fsync leave for the disk while the pacer runs")
    func dirtyPagesLeaveWhilePacing() async throws {
        // The count is the whole system's: tests that write beside this one can hide the file's pages leaving.
        // Up to three attempts, each with a new file; without the pacer the kernel keeps the pages for 30 s, so
        // every attempt would fail.
        var left: [Bool] = []
        for _ in 0..<3 where !left.contains(true) {
            left.append(try await Self.pagesLeaveWithin2s())
        }
        #expect(left.contains(true), "at least three quarters of the file left for the disk within 2 s")
    }

    /// Writes 128 MiB without an fsync, then paces it: whether the system's dirty bytes came back within a
    /// quarter of the file of where they were before, within 2 s.
    static func pagesLeaveWithin2s() async throws -> Bool {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/data"
        let size = 128 << 20
        let before = try Self.dirtyBytes()
        try Self.writeWithoutSync(size, to: file)
        let written = try Self.dirtyBytes()
        try #require(written - before > size / 2, "this file system counts the file's pages as dirty")
        let files = WritebackFiles(paths: [file])
        defer { files.close() }
        let pacer = WritebackPacer(files: files)
        let dirty = try await pacer.during {
            var dirty = written
            _ = try await eventually(tries: 100, every: .milliseconds(20)) {
                dirty = try Self.dirtyBytes()
                return dirty - before <= size / 4
            }
            return dirty
        }
        await pacer.shutdown()
        return dirty - before <= size / 4
    }

    /// Writes `size` bytes to a new file at `path` and closes it, without an fsync (Foundation's `Data.write`
    /// syncs).
    static func writeWithoutSync(_ size: Int, to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        try #require(fd >= 0)
        defer { close(fd) }
        let chunk = [UInt8](repeating: 7, count: 1 << 20)
        for _ in 0..<(size >> 20) {
            try #require(chunk.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == chunk.count)
        }
    }

    /// The system's dirty page cache, from /proc/meminfo.
    static func dirtyBytes() throws -> Int {
        let meminfo = try String(contentsOfFile: "/proc/meminfo", encoding: .utf8)
        let line = meminfo.split(separator: "\n").first { $0.hasPrefix("Dirty:") }
        let kib = line?.split(separator: " ").dropFirst().first.flatMap { Int($0) }
        return try #require(kib) * 1024
    }
}
