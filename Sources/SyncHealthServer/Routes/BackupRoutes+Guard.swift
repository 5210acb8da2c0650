import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// What keeps `GET /v1/backup` from holding the disk: one copy at a time, and a reader that stops reading is cut
/// off, so that the copy (a whole database) does not stay on disk for as long as a stalled client likes.
final class BackupGuard: Sendable {
    /// How long a download may make no progress before its connection is closed.
    let stallTimeout: Duration
    private let running = Mutex(false)

    init(stallTimeout: Duration = .seconds(60)) {
        self.stallTimeout = stallTimeout
    }

    /// Claims the one backup slot; `false` when a backup runs already.
    func begin() -> Bool {
        running.withLock { running in
            if running { return false }
            running = true
            return true
        }
    }

    /// Frees the slot.
    func end() {
        running.withLock { $0 = false }
    }
}

/// Deletes a copy and frees the backup slot, once, whichever comes first: the copy's last bytes about to be
/// written, or its body ending any other way.
final class BackupRelease: Sendable {
    private let released = Mutex(false)
    private let action: @Sendable () -> Void

    init(_ action: @escaping @Sendable () -> Void) {
        self.action = action
    }

    func callAsFunction() {
        let first = released.withLock { released in
            defer { released = true }
            return !released
        }
        if first { action() }
    }
}

/// Closes a connection when no write completes within `timeout`: each write re-arms it.
final class StallWatchdog: Sendable {
    private let channel: any Channel
    private let timeout: TimeAmount
    private let pending = Mutex<Scheduled<Void>?>(nil)

    init(channel: any Channel, timeout: Duration) {
        self.channel = channel
        self.timeout = .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000)
    }

    /// Starts (or restarts) the countdown.
    func arm() {
        let channel = channel
        let next = channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        pending.withLock { pending in
            pending?.cancel()
            pending = next
        }
    }

    /// Stops the countdown for good.
    func disarm() {
        pending.withLock { pending in
            pending?.cancel()
            pending = nil
        }
    }
}

/// A body writer whose every write must complete within the watchdog's timeout, and which releases the backup
/// before its last bytes go out: a client can have them, and ask again, before the write is reported complete,
/// and must then find the slot free.
struct WatchedBodyWriter: ResponseBodyWriter {
    var base: any ResponseBodyWriter
    let watchdog: StallWatchdog
    /// Bytes still to write, of the body's `content-length`.
    var remaining: Int
    let release: BackupRelease

    mutating func write(_ buffer: ByteBuffer) async throws {
        remaining -= buffer.readableBytes
        // The copy is read whole by now (the last bytes are in `buffer`): the file can go.
        if remaining <= 0 { release() }
        watchdog.arm()
        try await base.write(buffer)
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
        watchdog.arm()
        try await base.finish(trailingHeaders)
        watchdog.disarm()
    }
}
