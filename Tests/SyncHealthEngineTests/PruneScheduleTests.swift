import SyncHealthCore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthEngine

@Suite("Prune schedule")
struct PruneScheduleTests {
    let start = Timestamp(microseconds: 1_795_000_000_000_000)
    let retention = Duration.seconds(86_400)

    @Test("no pass in the first hour; then one pass with the cutoff of its start, batch after batch until one is short")
    func passRunsUntilShortBatch() {
        var schedule = PruneSchedule(start: start)
        #expect(schedule.cutoff(now: start + .seconds(3600), retention: retention) == nil)
        let passStart = start + .seconds(3601)
        #expect(schedule.cutoff(now: passStart, retention: retention) == passStart - retention)
        schedule.removed(100, limit: 100)
        #expect(schedule.passUnderWay)
        // Later batches of the same pass keep its cutoff.
        #expect(schedule.cutoff(now: passStart + .seconds(5), retention: retention) == passStart - retention)
        schedule.removed(30, limit: 100)
        #expect(!schedule.passUnderWay)
        #expect(schedule.lastPassRemoved == 130)
        #expect(schedule.cutoff(now: passStart + .seconds(3600), retention: retention) == nil, "the next pass is an hour after this one began")
        #expect(schedule.cutoff(now: passStart + .seconds(3601), retention: retention) == passStart + .seconds(3601) - retention)
        #expect(schedule.lastPassRemoved == 0)
    }

    @Test("a retention shorter than 7 hours starts a pass every seventh of it")
    func shortRetention() {
        var schedule = PruneSchedule(start: start)
        let short = Duration.seconds(70)
        #expect(schedule.cutoff(now: start + .seconds(10), retention: short) == nil)
        #expect(schedule.cutoff(now: start + .seconds(11), retention: short) == start + .seconds(11) - short)
        schedule.removed(0, limit: 100)
        #expect(schedule.cutoff(now: start + .seconds(21), retention: short) == nil)
        #expect(schedule.cutoff(now: start + .seconds(22), retention: short) == start + .seconds(22) - short)
    }
}
