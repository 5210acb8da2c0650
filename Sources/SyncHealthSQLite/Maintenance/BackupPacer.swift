import GRDB
import GRDBSQLite
import SyncHealthStore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Holds a backup's copy to a share of one core.
///
/// A copy of a large store is CPU work that ingestion would otherwise share, on a machine where ingestion uses every
/// core: run flat out, a copy of 1M devices took a third of the single-event rate while it ran. Paced, the copy
/// takes longer and ingestion barely notices (docs/operations.md#backup-and-restore).
///
/// The copy's pages are left to the page cache on purpose: `VACUUM INTO` does not fsync its output, the copy is
/// streamed out and deleted within seconds, so most of it never reaches the disk, where it would hold up the
/// journal's `fdatasync` (starting its writeback as it grew did just that).
///
/// It is SQLite's progress handler on the copying connection: every few thousand virtual-machine steps it looks at
/// the clock, and once the copy has worked for `work` it sleeps for `pause`. It runs on the copying thread only.
final class BackupPacer {
    /// How long the copy runs before it pauses.
    let work: Duration
    /// How long it pauses.
    let pause: Duration
    private var sliceStart = ContinuousClock.now
    /// Pauses taken.
    private(set) var pauses = 0

    /// The copy's default slice of work: with `defaultPause`, a tenth of one core.
    static let defaultWork = Duration.milliseconds(4)
    /// The default pause after each slice.
    static let defaultPause = Duration.milliseconds(36)

    /// A pacer that lets the copy run `work` out of every `work + pause`.
    init(work: Duration, pause: Duration) {
        self.work = work
        self.pause = pause
    }

    /// Runs `body` with the pacer installed on `db`.
    func during<T>(_ db: Database, _ body: () throws -> T) rethrows -> T {
        guard pause > .zero else { return try body() }
        sliceStart = .now
        let context = Unmanaged.passUnretained(self).toOpaque()
        sqlite3_progress_handler(
            db.sqliteConnection,
            2_000,
            { context in
                guard let context else { return 0 }
                Unmanaged<BackupPacer>.fromOpaque(context).takeUnretainedValue().step()
                return 0
            },
            context
        )
        defer { sqlite3_progress_handler(db.sqliteConnection, 0, nil, nil) }
        return try withExtendedLifetime(self) { try body() }
    }

    private func step() {
        guard ContinuousClock.now - sliceStart >= work else { return }
        pauses += 1
        let (seconds, attoseconds) = pause.components
        usleep(UInt32(clamping: seconds * 1_000_000 + attoseconds / 1_000_000_000_000))
        sliceStart = .now
    }
}
