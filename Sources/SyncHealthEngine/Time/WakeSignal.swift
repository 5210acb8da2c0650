import SyncHealthCore
import Synchronization

/// Wakes one waiting task; a signal sent while nobody waits is kept for the next wait.
///
/// A wait with a deadline sets an alarm of the clock (one for the signal's life, made at its first such wait)
/// rather than racing a sleeping task against the signal: loops such as the engine's wait after almost every
/// request when the load is light, and a task group per wait cost more than the rest of the wait.
final class WakeSignal: Sendable {
    private struct State {
        var signalled = false
        var waiter: CheckedContinuation<Void, Never>?
        var waiterId = 0
        var alarm: (any ServiceAlarm)?
    }

    private let state = Mutex(State())

    /// Wakes the waiter, or marks the signal for the next `wait`.
    func signal() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if let w = s.waiter {
                s.waiter = nil
                return w
            }
            s.signalled = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns at the next signal (or at once if one is pending), or when the task is cancelled.
    func wait() async {
        await wait(alarm: nil)
    }

    /// Returns at the next signal, at `deadline` on `clock`, or on cancellation, whichever comes first. It may
    /// return early, when an alarm set for an earlier wait rings late; callers look at what is due again.
    func wait(until deadline: Timestamp?, clock: any ServiceClock) async {
        guard let deadline else { return await wait() }
        let alarm = state.withLock { s -> any ServiceAlarm in
            if let alarm = s.alarm { return alarm }
            let alarm = clock.makeAlarm { [weak self] in self?.ring() }
            s.alarm = alarm
            return alarm
        }
        await wait(alarm: (alarm, deadline))
    }

    private func wait(alarm: (alarm: any ServiceAlarm, deadline: Timestamp)?) async {
        let id = state.withLock { s -> Int in
            s.waiterId += 1
            return s.waiterId
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { s -> Bool in
                    if s.signalled {
                        s.signalled = false
                        return true
                    }
                    // Cancelled: return without consuming a pending signal.
                    if Task.isCancelled { return true }
                    s.waiter = continuation
                    return false
                }
                if resumeNow {
                    continuation.resume()
                } else if let alarm {
                    alarm.alarm.set(alarm.deadline)
                }
            }
        } onCancel: {
            let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
                guard s.waiterId == id, let w = s.waiter else { return nil }
                s.waiter = nil
                return w
            }
            waiter?.resume()
        }
        alarm?.alarm.set(nil)
    }

    /// The alarm: wakes the waiter, if one waits, without leaving a signal for the next wait.
    private func ring() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }
}
