import Dispatch
import SyncHealthCore
import Synchronization

/// `SystemClock`'s alarm: one dispatch timer for the alarm's life, moved by `set`.
///
/// Deadlines are wall-clock times and the timer counts monotonic time, so the timer looks at most
/// `SystemClock.longestStep` ahead and, when it fires early, checks the wall clock and looks again. A deadline
/// that is cleared or replaced while the timer is due leaves it to fire once for nothing.
final class DispatchAlarm: ServiceAlarm, @unchecked Sendable {
    // @unchecked: `timer` is a dispatch source, whose methods may be called from any thread; the rest is in `deadline`.
    private let timer: any DispatchSourceTimer
    private let deadline = Mutex<Timestamp?>(nil)
    private let clock: SystemClock
    private let fire: @Sendable () -> Void

    init(clock: SystemClock, fire: @escaping @Sendable () -> Void) {
        self.clock = clock
        self.fire = fire
        timer = DispatchSource.makeTimerSource(queue: .global())
        timer.setEventHandler { [weak self] in self?.timerFired() }
        timer.activate()
    }

    deinit {
        timer.cancel()
    }

    func set(_ deadline: Timestamp?) {
        self.deadline.withLock { d in
            d = deadline
            if let deadline { schedule(for: deadline) }
        }
    }

    private func timerFired() {
        let due = deadline.withLock { d -> Bool in
            guard let deadline = d else { return false }
            if clock.now < deadline {
                schedule(for: deadline)
                return false
            }
            d = nil
            return true
        }
        if due { fire() }
    }

    /// Called with `deadline` locked, so that a `set` and a fire that looks again do not cross.
    private func schedule(for deadline: Timestamp) {
        let wait = min(max((deadline - clock.now).microseconds, 0), SystemClock.longestStep.microseconds)
        timer.schedule(deadline: .now() + .microseconds(Int(wait)), leeway: .nanoseconds(0))
    }
}
