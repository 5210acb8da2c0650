import CHeap
import SyncHealthCore
import Testing

@testable import SyncHealthEngine

// One test at a time: the memory test's 20,000 tasks keep the concurrency pool busy, and its heap figures are the
// process's.
@Suite("System clock", .serialized)
struct SystemClockTests {
    @Test("a sleep returns at its deadline, not before, and without sleeping for a deadline already past")
    func sleepsUntilTheDeadline() async throws {
        let clock = SystemClock()
        let started = ContinuousClock.now
        try await clock.sleep(until: clock.now + .milliseconds(30))
        let slept = ContinuousClock.now - started
        #expect(slept >= .milliseconds(29), "slept \(slept)")
        // Only that it returns: a loaded machine has held this 30 ms sleep's task up for 9 s.
        #expect(slept < .seconds(60), "slept \(slept)")
        // In a cancelled task any sleep throws at once, so returning there means it did not sleep.
        let past = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(until: clock.now - .seconds(1))
        }
        try await past.value
    }

    @Test("a cancelled sleep throws CancellationError at once, however far its deadline")
    func cancelledSleepThrows() async throws {
        let clock = SystemClock()
        let sleeper = Task { try await clock.sleep(until: clock.now + .seconds(86_400 * 365 * 100)) }
        try await Task.sleep(for: .milliseconds(20))
        let cancelled = ContinuousClock.now
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(ContinuousClock.now - cancelled < .seconds(2))
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(until: clock.now + .seconds(3600))
        }
        await #expect(throws: CancellationError.self) { try await early.value }
    }

    #if canImport(Glibc)
    @Test("what a cancelled sleep held is freed within a step, not at its deadline")
    func cancelledSleepFreesItsMemory() async throws {
        let clock = SystemClock()
        func inUse() -> Int64 {
            var inUse: Int64 = 0
            var free: Int64 = 0
            _ = cheap_heap_usage(&inUse, &free)
            return inUse
        }
        // The engine's loop does this at each early wake-up: a sleep until a deadline an hour off, cancelled
        // once it sleeps.
        let sleeps = 20_000
        let before = inUse()
        for _ in 0..<10 {
            let sleepers = (0..<sleeps / 10).map { _ in Task { try await clock.sleep(until: clock.now + .seconds(3600)) } }
            try await Task.sleep(for: .milliseconds(50))
            for sleeper in sleepers { sleeper.cancel() }
            for sleeper in sleepers { _ = try? await sleeper.value }
        }
        // A sleep to the deadline itself kept about 900 bytes each (18 MiB here) for the hour. In steps, all but
        // about 160 bytes each are freed within a step here (a standalone program keeps 15: this process also
        // runs the test framework).
        var grown = inUse() - before
        let cancelled = ContinuousClock.now
        while grown >= Int64(sleeps) * 400, ContinuousClock.now - cancelled < SystemClock.longestStep * 10 {
            try await Task.sleep(for: .milliseconds(100))
            grown = inUse() - before
        }
        #expect(grown < Int64(sleeps) * 400, "\(grown / Int64(sleeps)) bytes a cancelled sleep still held")
    }
    #endif
}
