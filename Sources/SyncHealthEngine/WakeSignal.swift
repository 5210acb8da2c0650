import SyncHealthCore
import Synchronization

/// Wakes one waiting task; a signal sent while nobody waits is kept for the next wait.
final class WakeSignal: Sendable {
    private struct State {
        var signalled = false
        var waiter: CheckedContinuation<Void, Never>?
        var waiterId = 0
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
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
                guard s.waiterId == id, let w = s.waiter else { return nil }
                s.waiter = nil
                return w
            }
            waiter?.resume()
        }
    }

    /// Returns at the next signal, at `deadline` on `clock`, or on cancellation, whichever comes first.
    func wait(until deadline: Timestamp?, clock: any ServiceClock) async {
        guard let deadline else { return await wait() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.wait() }
            group.addTask { try? await clock.sleep(until: deadline) }
            await group.next()
            group.cancelAll()
        }
    }
}
