import Dispatch
import GRDB
import GRDBSQLite
import SyncHealthStore
import Synchronization

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
/// the clock, and once the copy has worked for `work` it sleeps for `pause`; once `stop` is requested it interrupts
/// the copy (`SQLITE_INTERRUPT`). It runs on the copying thread only.
final class BackupPacer {
    /// A request to stop the copy, made from any thread (the request's task was cancelled). It wakes a pause, so a
    /// copy stops at once rather than at the end of its pause.
    final class Stop: Sendable {
        private let flag = Atomic(false)
        private let wake = DispatchSemaphore(value: 0)
        /// Asks the copy to stop at its next check.
        func request() {
            flag.store(true, ordering: .releasing)
            wake.signal()
        }
        /// Whether a stop was asked for.
        var requested: Bool { flag.load(ordering: .acquiring) }
        /// Sleeps for `duration`, or until a stop is requested.
        func pause(for duration: Duration) {
            let (seconds, attoseconds) = duration.components
            let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
            _ = wake.wait(timeout: .now() + .nanoseconds(Int(clamping: nanoseconds)))
        }
    }

    /// How long the copy runs before it pauses.
    let work: Duration
    /// How long it pauses.
    let pause: Duration
    /// Stops the copy when requested.
    let stop: Stop
    private var sliceStart = ContinuousClock.now
    /// Pauses taken.
    private(set) var pauses = 0

    /// The copy's default slice of work: with `defaultPause`, a tenth of one core.
    static let defaultWork = Duration.milliseconds(4)
    /// The default pause after each slice.
    static let defaultPause = Duration.milliseconds(36)

    /// A pacer that lets the copy run `work` out of every `work + pause`, until `stop` is requested.
    init(work: Duration, pause: Duration, stop: Stop = Stop()) {
        self.work = work
        self.pause = pause
        self.stop = stop
    }

    /// Runs `body` with the pacer installed on `db`.
    func during<T>(_ db: Database, _ body: () throws -> T) rethrows -> T {
        sliceStart = .now
        let context = Unmanaged.passUnretained(self).toOpaque()
        sqlite3_progress_handler(
            db.sqliteConnection,
            2_000,
            { context in
                guard let context else { return 0 }
                return Unmanaged<BackupPacer>.fromOpaque(context).takeUnretainedValue().step()
            },
            context
        )
        defer { sqlite3_progress_handler(db.sqliteConnection, 0, nil, nil) }
        return try withExtendedLifetime(self) { try body() }
    }

    /// Pauses when the slice is used up; returns nonzero to interrupt the copy.
    private func step() -> Int32 {
        if stop.requested { return 1 }
        guard pause > .zero, ContinuousClock.now - sliceStart >= work else { return 0 }
        pauses += 1
        stop.pause(for: pause)
        sliceStart = .now
        return stop.requested ? 1 : 0
    }
}
