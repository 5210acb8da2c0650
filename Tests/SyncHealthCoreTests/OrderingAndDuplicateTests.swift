import SyncHealthMonitorFixtures
import SyncHealthTestSupport
import Testing

@testable import SyncHealthCore

@Suite("Real-world input: order, staleness, duplicates, clock skew")
struct OrderingAndDuplicateTests {
    @Test("an older event arriving later does not overwrite a slot")
    func staleEventIgnored() {
        var f = EventFactory()
        let newer = f.succeeded(.import, at: t(10))
        let older = f.failed(.import, at: t(5), error: ckQuota)
        var m = MonitorState()
        #expect(m.apply(newer, receivedAt: t(20)) == .applied)
        // Stale for the import slot, but it is still the most recent error: lastSyncError is sticky and
        // would hold it in occurredAt order too.
        #expect(m.apply(older, receivedAt: t(21)) == .applied)
        #expect(m.importPhase.state == .succeeded(startedAt: t(10), endedAt: t(10)))
        #expect(m.lastSyncError == ckQuota)
        let network = f.network(true, at: t(1))
        m.apply(f.network(false, at: t(3)), receivedAt: t(22))
        #expect(m.apply(network, receivedAt: t(23)) == .stale)
    }

    @Test("network and account values are last-writer-wins on occurredAt")
    func networkAndAccountStale() {
        var f = EventFactory()
        let m = fold([f.network(false, at: t(10)), f.network(true, at: t(5)), f.account(.noAccount, at: t(10)), f.account(.available, at: t(1))])
        #expect(m.network == false)
        #expect(m.account == .noAccount)
    }

    @Test("any arrival order of a batch gives the state of occurredAt order")
    func orderIndependence() {
        var f = EventFactory()
        let events =
            healthy(&f) + [
                f.started(.export, at: t(20)), f.failed(.export, at: t(21), error: ckQuota),
                f.network(false, at: t(22)), f.network(true, at: t(23)), f.started(.import, at: t(24)),
            ]
        let reference = fold(events)
        var rng = SplitMix64(seed: 7)
        for _ in 0..<50 {
            var shuffled = events
            shuffled.shuffle(using: &rng)
            #expect(fold(shuffled) == reference)
        }
    }

    @Test("random event streams give the same state in any arrival order", arguments: 0..<30)
    func randomOrderIndependence(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let events = (0..<60).map { n in
            DeviceEvent(eventId: "e\(n)", occurredAt: t(Double(n)), body: FleetCounterPropertyTests.randomBody(&rng))
        }
        let reference = fold(events)
        for _ in 0..<10 {
            #expect(fold(events.shuffled(using: &rng)) == reference, "seed \(seed)")
        }
    }

    @Test("a failure that is stale for its phase still becomes lastSyncError when it is the newest error")
    func lastSyncErrorIndependentOfSlot() {
        var f = EventFactory()
        var m = MonitorState()
        m.apply(f.failed(.import, at: t(1), error: ckQuota), receivedAt: t(10))
        m.apply(f.succeeded(.export, at: t(5)), receivedAt: t(10))
        m.apply(f.started(.export, at: t(9)), receivedAt: t(10))
        // Arrives late: older than the export slot, newer than the last error.
        #expect(m.apply(f.failed(.export, at: t(7), error: ckBadContainer), receivedAt: t(11)) == .applied)
        #expect(m.lastSyncError == ckBadContainer)
        #expect(m.export.state == .inProgress(startedAt: t(9)))
    }

    @Test("ingest applies a batch in occurredAt order, and in batch order for equal times")
    func ingestSortsBatch() {
        var f = EventFactory()
        var record = DeviceRecord(key: DeviceKey(appId: "a", deviceId: "d"), firstSeenAt: t(3))
        let result = record.ingest([f.network(true, at: t(2)), f.network(false, at: t(1))], info: DeviceInfo(), now: t(3))
        #expect(result.applied == 2 && result.stale == 0, "sorted first, so neither is stale")
        #expect(record.monitor.network == true)
        _ = record.ingest([f.network(false, at: t(5)), f.network(true, at: t(5))], info: DeviceInfo(), now: t(6))
        #expect(record.monitor.network == true)
        _ = record.ingest([f.network(true, at: t(7)), f.network(false, at: t(7))], info: DeviceInfo(), now: t(8))
        #expect(record.monitor.network == false)
    }

    @Test("a repeated eventId is a duplicate, within a batch and against ids already seen")
    func duplicates() {
        let a = DeviceEvent(eventId: "x", occurredAt: t(1), body: .network(available: true))
        let b = DeviceEvent(eventId: "y", occurredAt: t(2), body: .network(available: false))
        let c = DeviceEvent(eventId: "x", occurredAt: t(3), body: .network(available: false))
        let split = [a, b, c].removingDuplicates(alreadySeen: { $0 == "y" })
        #expect(split.fresh == [a])
        #expect(split.duplicates == 2)
        // A batch of one event, the common request, takes a shorter path with the same answers.
        #expect([b].removingDuplicates(alreadySeen: { $0 == "y" }) == ([], 1))
        #expect([a].removingDuplicates(alreadySeen: { $0 == "y" }) == ([a], 0))
        #expect([DeviceEvent]().removingDuplicates(alreadySeen: { _ in true }) == ([], 0))
    }

    @Test("a timestamp far in the future is clamped to receipt and cannot block later real events")
    func futureTimestampClamped() {
        var f = EventFactory()
        var record = DeviceRecord(key: DeviceKey(appId: "a", deviceId: "d"), firstSeenAt: t(0))
        let bogus = f.make(Timestamp(rfc3339: "2099-01-01T00:00:00Z") ?? t(0), .network(available: false))
        let first = record.ingest([bogus], info: DeviceInfo(), now: t(100))
        #expect(first.clamped == 1)
        #expect(record.clockSkewDetected)
        #expect(record.monitor.networkSetAt == t(100))
        _ = record.ingest([f.network(true, at: t(101))], info: DeviceInfo(), now: t(102))
        #expect(record.monitor.network == true)
    }

    @Test("a timestamp within the tolerance is kept as sent")
    func smallSkewKept() {
        var f = EventFactory()
        var record = DeviceRecord(key: DeviceKey(appId: "a", deviceId: "d"), firstSeenAt: t(0))
        let result = record.ingest([f.network(true, at: t(200))], info: DeviceInfo(), now: t(100))
        #expect(result.clamped == 0)
        #expect(record.monitor.networkSetAt == t(200))
    }
}
