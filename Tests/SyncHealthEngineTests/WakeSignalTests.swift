import SyncHealthCore
import SyncHealthEngineTesting
import SyncHealthTestSupport
import Testing

@testable import SyncHealthEngine

@Suite("Wake signal")
struct WakeSignalTests {
    @Test("a timed wait ends at its deadline on the clock, and its alarm counts as a sleeper only while it waits")
    func timedWaitEndsAtTheDeadline() async throws {
        let clock = ManualClock(testStart)
        let signal = WakeSignal()
        let waiter = Task { await signal.wait(until: clock.now + .seconds(10), clock: clock) }
        try await within { await clock.waitForSleepers(1) }
        clock.advance(by: .seconds(9))
        #expect(clock.sleeperCount == 1)
        clock.advance(by: .seconds(1))
        try await within { await waiter.value }
        #expect(clock.sleeperCount == 0)
    }

    @Test("a signal ends a timed wait before its deadline and disarms its alarm")
    func signalEndsATimedWait() async throws {
        let clock = ManualClock(testStart)
        let signal = WakeSignal()
        let waiter = Task { await signal.wait(until: clock.now + .seconds(3600), clock: clock) }
        try await within { await clock.waitForSleepers(1) }
        signal.signal()
        try await within { await waiter.value }
        #expect(clock.sleeperCount == 0)
        // The alarm of the first wait does not end the second one at the first one's deadline.
        let second = Task { await signal.wait(until: clock.now + .seconds(7200), clock: clock) }
        try await within { await clock.waitForSleepers(1) }
        clock.advance(by: .seconds(3600))
        #expect(clock.sleeperCount == 1)
        clock.advance(by: .seconds(3600))
        try await within { await second.value }
    }

    @Test("a signal sent before a timed wait ends it at once, and is used up")
    func pendingSignalEndsTheNextWait() async throws {
        let clock = ManualClock(testStart)
        let signal = WakeSignal()
        signal.signal()
        try await within { await signal.wait(until: clock.now + .seconds(3600), clock: clock) }
        #expect(clock.sleeperCount == 0)
        let waiter = Task { await signal.wait(until: clock.now + .seconds(5), clock: clock) }
        try await within { await clock.waitForSleepers(1) }
        clock.advance(by: .seconds(5))
        try await within { await waiter.value }
    }

    @Test("an alarm that rings does not leave a signal for the next wait")
    func alarmLeavesNoSignal() async throws {
        let clock = ManualClock(testStart)
        let signal = WakeSignal()
        let first = Task { await signal.wait(until: clock.now + .seconds(1), clock: clock) }
        try await within { await clock.waitForSleepers(1) }
        clock.advance(by: .seconds(1))
        try await within { await first.value }
        let second = Task { await signal.wait(until: clock.now + .seconds(1), clock: clock) }
        try await within { await clock.waitForSleepers(1) }
        second.cancel()
        try await within { await second.value }
    }

    @Test("on the system clock, a timed wait ends at its deadline, and a signal ends it sooner")
    func systemClockAlarm() async throws {
        let clock = SystemClock()
        let signal = WakeSignal()
        let started = ContinuousClock.now
        await signal.wait(until: clock.now + .milliseconds(30), clock: clock)
        let waited = ContinuousClock.now - started
        #expect(waited >= .milliseconds(29), "waited \(waited)")
        // A wait an hour long, ended by a signal: only that it returns.
        let waiter = Task { await signal.wait(until: clock.now + .seconds(3600), clock: clock) }
        try await Task.sleep(for: .milliseconds(20))
        signal.signal()
        try await within(.seconds(60)) { await waiter.value }
    }
}
