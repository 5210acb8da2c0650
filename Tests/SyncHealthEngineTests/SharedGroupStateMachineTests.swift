import SyncHealthCore
import SyncHealthStore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthEngine

@Suite("One shared group's round trips: write first, read and plan again on a refusal, give up after enough")
struct SharedGroupStateMachineTests {
    static let a = DeviceKey(appId: "app", deviceId: "a")
    static let b = DeviceKey(appId: "app", deviceId: "b")
    static let now = t0

    static func machine(mayWriteFirst: Bool = true, maxAttempts: Int = 8) -> SharedGroupStateMachine {
        SharedGroupStateMachine(
            keys: [a],
            claims: [(a, ["e1"])],
            containers: ["iCloud.c"],
            mayWriteFirst: mayWriteFirst,
            everyContainer: false,
            now: now,
            dueLimit: 100,
            maxAttempts: maxAttempts
        )
    }

    /// A plan that writes the device `a` (or nothing).
    static func plan(writes: Bool = true) -> GroupPlan {
        var changes = StoreChanges(recordedAt: now)
        if writes { changes.devices = [DeviceRecord(key: a, firstSeenAt: now)] }
        return GroupPlan(changes: changes, fleetAlerts: FleetAlerts())
    }

    static func stored(_ key: DeviceKey, version: Int64) -> StoredDevice {
        StoredDevice(record: DeviceRecord(key: key, firstSeenAt: now), countedAt: now, version: version)
    }

    @Test("known to the cache: planned without a read, written first, finished")
    func writesFirstOnTheCache() throws {
        var machine = Self.machine()
        var cached = GroupSnapshot()
        cached.devices = [Self.stored(Self.a, version: 3)]
        guard case .plan(_, let due) = machine.start(cached: cached) else {
            Issue.record("expected a plan")
            return
        }
        #expect(due.isEmpty)
        guard case .write(let write, let first) = machine.planned(Self.plan(), countsKnown: true) else {
            Issue.record("expected a write")
            return
        }
        #expect(first)
        #expect(write.versions == [Self.a: 3], "guarded on the version the cache holds")
        guard case .finished(let plan) = machine.wrote(true) else {
            Issue.record("expected the end")
            return
        }
        #expect(plan.changes.devices.map(\.key) == [Self.a])
        #expect(machine.attempts == 1)
    }

    @Test("a write first that is refused reads, plans again and writes guarded on what it read")
    func refusedWriteFirstReads() throws {
        var machine = Self.machine()
        _ = machine.start(cached: GroupSnapshot())
        _ = machine.planned(Self.plan(), countsKnown: true)
        guard case .read(let read) = machine.wrote(false) else {
            Issue.record("expected a read")
            return
        }
        #expect(read.keys == [Self.a] && read.containers == ["iCloud.c"] && read.claims.map(\.eventIds) == [["e1"]])
        #expect(!machine.writingFirst)
        var snapshot = GroupSnapshot()
        snapshot.devices = [Self.stored(Self.a, version: 4)]
        guard case .plan = machine.read(snapshot) else {
            Issue.record("expected a plan")
            return
        }
        guard case .write(let write, let first) = machine.planned(Self.plan(), countsKnown: true) else {
            Issue.record("expected a write")
            return
        }
        #expect(!first && write.versions == [Self.a: 4])
        guard case .finished = machine.wrote(true) else {
            Issue.record("expected the end")
            return
        }
        #expect(machine.attempts == 2)
    }

    @Test("a group that may not write first, or that the cache does not know, reads first")
    func readsWhenTheCacheCannotServe() {
        var notAllowed = Self.machine(mayWriteFirst: false)
        guard case .read = notAllowed.start(cached: GroupSnapshot()) else {
            Issue.record("expected a read")
            return
        }
        var unknown = Self.machine()
        guard case .read = unknown.start(cached: nil) else {
            Issue.record("expected a read")
            return
        }
    }

    @Test("planned on the cache but needing fleet counts it lacks: read instead of writing")
    func unknownCountsRead() {
        var machine = Self.machine()
        _ = machine.start(cached: GroupSnapshot())
        guard case .read = machine.planned(Self.plan(), countsKnown: false) else {
            Issue.record("expected a read")
            return
        }
        #expect(!machine.writingFirst)
    }

    @Test("nothing to write: finished without a write")
    func emptyPlanFinishes() {
        var machine = Self.machine()
        _ = machine.start(cached: GroupSnapshot())
        guard case .finished = machine.planned(Self.plan(writes: false), countsKnown: true) else {
            Issue.record("expected the end")
            return
        }
    }

    @Test("timers claimed by one read stay the group's: read again, planned, and written as claimed")
    func claimedTimersCarryOver() {
        var machine = Self.machine(mayWriteFirst: false)
        _ = machine.start(cached: nil)
        var first = GroupSnapshot()
        first.due = [Self.stored(Self.b, version: 7)]
        guard case .plan(_, let due) = machine.read(first) else {
            Issue.record("expected a plan")
            return
        }
        #expect(due == [Self.b])
        _ = machine.planned(Self.plan(), countsKnown: true)
        guard case .read(let again) = machine.wrote(false) else {
            Issue.record("expected a read")
            return
        }
        #expect(again.keys == [Self.a, Self.b], "the claimed device is read with the group's own")
        var second = GroupSnapshot()
        second.devices = [Self.stored(Self.a, version: 1), Self.stored(Self.b, version: 8)]
        guard case .plan(_, let dueAgain) = machine.read(second) else {
            Issue.record("expected a plan")
            return
        }
        #expect(dueAgain == [Self.b])
        guard case .write(let write, _) = machine.planned(Self.plan(), countsKnown: true) else {
            Issue.record("expected a write")
            return
        }
        #expect(write.claimedTimers == [Self.b] && write.versions == [Self.a: 1, Self.b: 8])
    }

    @Test("refused maxAttempts times in a row: give up")
    func givesUpAfterMaxAttempts() {
        var machine = Self.machine(maxAttempts: 3)
        var action = machine.start(cached: GroupSnapshot())
        var writes = 0
        loop: while true {
            switch action {
            case .read: action = machine.read(GroupSnapshot())
            case .plan: action = machine.planned(Self.plan(), countsKnown: true)
            case .write:
                writes += 1
                action = machine.wrote(false)
            case .finished:
                Issue.record("a refused group cannot finish")
                break loop
            case .giveUp: break loop
            }
        }
        #expect(writes == 3 && machine.attempts == 3)
    }

    #if !os(iOS) && !os(watchOS) && !os(tvOS) && !os(visionOS)
    @Test("a step out of order traps: a read's reply before any read, a write's reply while planning, a step after the end")
    func stepsOutOfOrderTrap() async {
        await #expect(processExitsWith: .failure) {
            var machine = SharedGroupStateMachineTests.machine(mayWriteFirst: false)
            _ = machine.read(GroupSnapshot())
        }
        await #expect(processExitsWith: .failure) {
            var machine = SharedGroupStateMachineTests.machine()
            var cached = GroupSnapshot()
            cached.devices = [SharedGroupStateMachineTests.stored(SharedGroupStateMachineTests.a, version: 1)]
            _ = machine.start(cached: cached)
            _ = machine.wrote(true)
        }
        await #expect(processExitsWith: .failure) {
            var machine = SharedGroupStateMachineTests.machine(mayWriteFirst: false)
            _ = machine.start(cached: nil)
            _ = machine.read(GroupSnapshot())
            _ = machine.planned(SharedGroupStateMachineTests.plan(writes: false), countsKnown: true)
            _ = machine.planned(SharedGroupStateMachineTests.plan(), countsKnown: true)
        }
        // The same steps in order do not trap.
        var machine = Self.machine(mayWriteFirst: false)
        guard case .read = machine.start(cached: nil), case .plan = machine.read(GroupSnapshot()),
            case .finished = machine.planned(Self.plan(writes: false), countsKnown: true)
        else {
            Issue.record("expected read, plan, finished")
            return
        }
    }
    #endif
}
