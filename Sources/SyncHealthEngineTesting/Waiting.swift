import SyncHealthCore
public import SyncHealthStore

/// A wait's liveness bound passed: what it waited for did not happen.
public struct TimedOut: Error {
    /// A timeout.
    public init() {}
}

/// Runs `body`, or throws `TimedOut` after `limit`: a liveness bound that keeps a broken test from hanging, not a
/// wait for anything.
public func within(_ limit: Duration = .seconds(5), _ body: @escaping @Sendable () async throws -> Void) async throws {
    try await withThrowingTaskGroup(of: Bool.self) { group in
        group.addTask {
            try await body()
            return true
        }
        group.addTask {
            try await Task.sleep(for: limit)
            return false
        }
        let finished = try await group.next() ?? false
        group.cancelAll()
        if !finished { throw TimedOut() }
    }
}

/// Whether `condition` comes to hold, for effects of tasks the test does not await (the engine's loops, a
/// delivery, another process). It looks `tries` times, `interval` apart: at least five seconds by default, and
/// longer on a loaded machine, where each pause takes longer (a bound on tries, not on time, so that a full suite on
/// two cores does not fail a test that is only slow). A liveness bound that keeps a broken test from hanging, not a
/// wait for anything. A wider `interval` for a condition that costs a request to another process.
public func eventually(
    tries: Int = 500,
    every interval: Duration = .milliseconds(10),
    _ condition: () async throws -> Bool
) async throws -> Bool {
    for _ in 0..<tries {
        if try await condition() { return true }
        try? await Task.sleep(for: interval)
    }
    return try await condition()
}

extension ManualClock {
    /// Moves the clock by `duration` and returns once what the move made due has run. The engine's loops sleep on
    /// the clock between passes, so once as many tasks sleep on it as before the move, every woken loop has done its
    /// pass: a check after this sees a timer's effect, or that it had none. Throws `TimedOut` if a woken loop does
    /// not sleep again within `limit`.
    public func advanceAndSettle(by duration: Duration, limit: Duration = .seconds(5)) async throws {
        let asleep = sleeperCount
        advance(by: duration)
        try await within(limit) { await self.waitForSleepers(asleep) }
    }
}

/// Whether every webhook message written to `store` so far has been delivered (none waits in its outbox). Messages
/// are written with the commit that decides them, so once a test's posts have returned, a count of deliveries taken
/// after this holds is final for them: a test can check that something was not sent without sleeping.
/// It reads without claiming (PostgreSQL's `dueMessages` leases what it returns).
public func outboxDrained(_ store: any WebhookStore) async throws -> Bool {
    try await store.nextDueTime() == nil
}
