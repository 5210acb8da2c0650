import CWriteback
import NIOPosix
import SyncHealthStore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Starts the kernel's writeback of the store's database file and WAL every few milliseconds while a fold or a
/// checkpoint writes them, on a thread of its own.
///
/// A fold writes its pages into the WAL and a checkpoint copies them into the database file, tens of MiB each
/// under load. Left to the fsync at their end, those pages leave for the disk all at once, and each commit's
/// `fdatasync` of the journal, on the same disk, waits behind them. Started as they are written, they leave in
/// small pieces, the final fsync finds little left, and the journal's small writes go in between. PostgreSQL
/// (`checkpoint_flush_after`) and RocksDB (`bytes_per_sync`) pace their writes the same way. Durability is
/// unchanged: starting writeback promises nothing, and SQLite's own fsyncs still decide what is on disk.
final class WritebackPacer: Sendable {
    let files: WritebackFiles
    /// How long the thread sleeps between two rounds.
    let intervalMicroseconds: UInt32
    private let thread = NIOThreadPool(numberOfThreads: 1)
    /// Changes when pacing starts and when it stops: a pacing loop runs while it still reads its own value.
    private let generation = Atomic<Int>(0)
    private let roundCount = Atomic<Int>(0)
    private let refusalCount = Atomic<Int>(0)

    init(files: WritebackFiles, intervalMicroseconds: UInt32 = 1_000) {
        self.files = files
        self.intervalMicroseconds = intervalMicroseconds
        thread.start()
    }

    /// Rounds of writeback started so far (one round starts every file's).
    var rounds: Int { roundCount.load(ordering: .relaxed) }
    /// Starts the kernel refused (`sync_file_range` failed).
    var refusals: Int { refusalCount.load(ordering: .relaxed) }

    /// Runs `body` while the pacing thread starts the files' writeback every interval.
    func during<T>(_ body: () async throws -> T) async rethrows -> T {
        let mine = generation.wrappingAdd(1, ordering: .relaxed).newValue
        thread.submit { state in
            guard case .active = state else { return }
            self.pace(while: mine)
        }
        defer { generation.wrappingAdd(1, ordering: .relaxed) }
        return try await body()
    }

    private func pace(while mine: Int) {
        while generation.load(ordering: .relaxed) == mine {
            refusalCount.wrappingAdd(files.startWriteback(), ordering: .relaxed)
            roundCount.wrappingAdd(1, ordering: .relaxed)
            usleep(intervalMicroseconds)
        }
    }

    /// Stops the thread, after the pacing that runs has stopped.
    func shutdown() async {
        generation.wrappingAdd(1, ordering: .relaxed)
        try? await thread.shutdownGracefully()
    }
}
