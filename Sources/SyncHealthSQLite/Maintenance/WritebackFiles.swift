import CWriteback
import NIOPosix
import SyncHealthStore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The store's database file and WAL, open read-only so that `WritebackPacer` can start their writeback.
///
/// They stay open until the store has closed every SQLite connection to them: closing any descriptor of a file
/// drops every POSIX lock this process holds on it, SQLite's included, and another process could then take the
/// database for unused (SQLite's "How To Corrupt An SQLite Database File", 2.2).
final class WritebackFiles: Sendable {
    private let descriptors: Mutex<[Int32]>

    /// Opens the files at `paths` that exist.
    init(paths: [String]) {
        descriptors = Mutex(paths.map { open($0, O_RDONLY | O_CLOEXEC) }.filter { $0 >= 0 })
    }

    /// Starts the writeback of each file's dirty pages, without waiting for it; returns how many the kernel refused.
    func startWriteback() -> Int {
        descriptors.withLock { files in files.count { cwriteback_start($0) != 0 } }
    }

    /// Closes the files. Only once no SQLite connection has them open (see the type's comment).
    func close() {
        descriptors.withLock { files in
            for file in files { closeDescriptor(file) }
            files = []
        }
    }
}
