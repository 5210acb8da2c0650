import SyncHealthMonitorFixtures
import Testing

@testable import SyncHealthCore

/// Drives one device through the rules with a manual clock.
struct AlertHarness {
    var clock = ManualClock(t(1000))
    var record = DeviceRecord(
        key: DeviceKey(appId: "com.example", deviceId: "dev-1"),
        info: DeviceInfo(containerId: "iCloud.x"),
        firstSeenAt: t(1000)
    )
    var factory = EventFactory()
    var configuration = AlertConfiguration()
    var transitions: [AlertTransition] = []
    var nextDeadline: Timestamp?

    /// Posts events stamped with the current clock.
    mutating func post(_ make: (inout EventFactory, Timestamp) -> [DeviceEvent]) {
        let events = make(&factory, clock.now)
        let result = record.ingest(events, info: DeviceInfo(), now: clock.now, configuration: configuration)
        transitions += result.transitions
        nextDeadline = result.nextDeadline
    }

    /// Advances the clock to `time` and evaluates, as the timer would.
    mutating func tick(to time: Timestamp) {
        clock.advance(to: time)
        let evaluation = record.evaluateAlerts(now: clock.now, configuration: configuration)
        transitions += evaluation.transitions
        nextDeadline = evaluation.nextDeadline
    }

    /// Transitions of `kind` so far.
    func of(_ kind: AlertKind) -> [AlertTransition.Change] { transitions.filter { $0.kind == kind }.map(\.change) }
}

let oneMicro = Duration.microseconds(1)

@Suite("Part 2: alert rules fire and resolve at their exact deadlines")
struct AlertRuleTests {
    @Test("syncError for a transient error fires exactly 120 s after it was observed, and resolves when it clears")
    func syncErrorTransient() {
        var h = AlertHarness()
        h.post { f, now in
            healthy(&f).map {
                var e = $0
                e.occurredAt = now
                return e
            } + [f.failed(.export, at: now + .seconds(1), error: ckNetworkFailure)]
        }
        let observed = h.clock.now
        #expect(h.nextDeadline == observed + .seconds(120))
        h.tick(to: observed + .seconds(120) - oneMicro)
        #expect(h.of(.syncError).isEmpty)
        h.tick(to: observed + .seconds(120))
        #expect(h.of(.syncError) == [.fire])
        #expect(h.record.syncError.firingSince == observed + .seconds(120))
        h.clock.advance(.seconds(5))
        h.post { f, now in [f.started(.export, at: now + .seconds(10))] }
        #expect(h.of(.syncError) == [.fire, .resolve])
        let resolve = h.transitions.last { $0.kind == .syncError }
        #expect(resolve?.startsAt == observed + .seconds(120))
        #expect(resolve?.endsAt == h.clock.now)
    }

    @Test("syncError for developer and dataLoss classes fires at once", arguments: [5, 8, 26, 28])
    func syncErrorUrgent(code: Int) {
        var h = AlertHarness()
        h.post { f, now in [f.network(true, at: now), f.failed(.setup, at: now, error: SyncErrorReport(domain: "CKErrorDomain", code: code))] }
        #expect(h.of(.syncError) == [.fire])
    }

    @Test("a transient error that clears before its delay never fires")
    func syncErrorClearsInTime() {
        var h = AlertHarness()
        h.post { f, now in [f.network(true, at: now), f.failed(.import, at: now, error: ckNetworkFailure)] }
        h.clock.advance(.seconds(119))
        h.post { f, now in [f.succeeded(.import, at: now)] }
        h.tick(to: h.clock.now + .seconds(3600))
        #expect(h.of(.syncError).isEmpty)
    }

    @Test("the configured errorAfter delay is used")
    func syncErrorConfigured() {
        var h = AlertHarness()
        h.configuration.errorAfter = .seconds(5)
        h.post { f, now in [f.network(true, at: now), f.failed(.import, at: now, error: ckQuota)] }
        #expect(h.nextDeadline == h.clock.now + .seconds(5))
    }

    @Test("notSyncing fires exactly 60 s after import failed to start, and resolves when import starts")
    func notSyncing() {
        var h = AlertHarness()
        h.post { f, now in [f.account(.available, at: now), f.network(true, at: now), f.succeeded(.setup, at: now)] }
        let observed = h.clock.now
        h.tick(to: observed + .seconds(60) - oneMicro)
        #expect(h.of(.notSyncing).isEmpty)
        h.tick(to: observed + .seconds(60))
        #expect(h.of(.notSyncing) == [.fire])
        h.clock.advance(.seconds(1))
        h.post { f, now in [f.started(.import, at: now)] }
        #expect(h.of(.notSyncing) == [.fire, .resolve])
    }

    @Test("syncStalled fires when one activity stays in progress for 15 minutes")
    func stalledInProgress() {
        var h = AlertHarness()
        h.post { f, now in [f.network(true, at: now), f.started(.import, at: now)] }
        let observed = h.clock.now
        #expect(h.nextDeadline == observed + .seconds(900))
        h.tick(to: observed + .seconds(900) - oneMicro)
        #expect(h.of(.syncStalled).isEmpty)
        h.tick(to: observed + .seconds(900))
        #expect(h.of(.syncStalled) == [.fire])
        h.clock.advance(.seconds(1))
        h.post { f, now in [f.succeeded(.import, at: now), f.succeeded(.export, at: now)] }
        #expect(h.of(.syncStalled) == [.fire, .resolve])
    }

    @Test("a device that keeps starting new activities is not stalled")
    func newActivitiesAreNotAStall() {
        var h = AlertHarness()
        for _ in 0..<10 {
            // Each batch ends one import and starts the next, so some import is always in progress.
            h.post { f, now in [f.succeeded(.import, at: now), f.started(.import, at: now + .seconds(1))] }
            h.clock.advance(.seconds(600))
        }
        #expect(h.of(.syncStalled).isEmpty)
    }

    @Test("syncStalled fires when the summary stays unknown for a reason that is not a parity quirk")
    func stalledUnknown() {
        var h = AlertHarness()
        h.post { f, now in [f.network(true, at: now), f.succeeded(.setup, at: now), f.succeeded(.export, at: now)] }
        #expect(h.record.monitor.summary == .unknown)
        #expect(!h.record.monitor.isUnknownFromQuirk)
        h.tick(to: h.clock.now + .seconds(900))
        #expect(h.of(.syncStalled) == [.fire])
    }

    @Test("parity quirks that show unknown raise no alert at all")
    func quirksRaiseNoAlert() {
        var h = AlertHarness()
        // Import succeeded, nothing exported yet.
        h.post { f, now in [f.account(.available, at: now), f.network(true, at: now), f.succeeded(.setup, at: now), f.succeeded(.import, at: now)] }
        h.tick(to: h.clock.now + .seconds(7200))
        var g = AlertHarness()
        // Export failed without an error.
        g.post { f, now in
            [
                f.account(.available, at: now), f.network(true, at: now), f.succeeded(.setup, at: now), f.succeeded(.import, at: now),
                f.failed(.export, at: now, error: nil),
            ]
        }
        g.tick(to: g.clock.now + .seconds(7200))
        var k = AlertHarness()
        // Setup failed while import and export never started.
        k.post { f, now in [f.account(.available, at: now), f.failed(.setup, at: now, error: ckQuota)] }
        k.tick(to: k.clock.now + .seconds(7200))
        #expect(h.record.monitor.summary == .unknown && g.record.monitor.summary == .unknown && k.record.monitor.summary == .unknown)
        #expect(h.transitions.isEmpty)
        #expect(g.transitions.isEmpty)
        #expect(k.transitions.isEmpty)
    }

    @Test("exportAtRisk fires 30 minutes after the oldest pending change, measured on the service clock")
    func exportAtRisk() {
        var h = AlertHarness()
        // The device clock is 3 hours behind; its oldest change is 10 minutes old when reported.
        h.post { f, now in
            let deviceNow = now - .seconds(3 * 3600)
            return [
                f.account(.available, at: deviceNow), f.network(true, at: deviceNow),
                f.make(deviceNow, .pending(count: 4, oldestPendingAt: deviceNow - .seconds(600))),
            ]
        }
        let due = h.clock.now + .seconds(1200)
        #expect(h.nextDeadline == due)
        h.tick(to: due - oneMicro)
        #expect(h.of(.exportAtRisk).isEmpty)
        h.tick(to: due)
        #expect(h.of(.exportAtRisk) == [.fire])
        h.clock.advance(.seconds(1))
        h.post { f, now in [f.succeeded(.export, at: now - .seconds(3 * 3600) + .seconds(1))] }
        #expect(h.of(.exportAtRisk) == [.fire, .resolve])
    }

    @Test("exportAtRisk does not hold while the network is down")
    func exportAtRiskNeedsNetwork() {
        var h = AlertHarness()
        h.post { f, now in [f.account(.available, at: now), f.network(false, at: now), f.make(now, .pending(count: 1, oldestPendingAt: now))] }
        h.tick(to: h.clock.now + .seconds(7200))
        #expect(h.of(.exportAtRisk).isEmpty)
    }

    @Test("nextDeadline includes the moment the device goes silent")
    func silentDeadline() {
        var h = AlertHarness()
        h.post { f, now in
            healthy(&f).map {
                var e = $0
                e.occurredAt = now
                return e
            }
        }
        #expect(h.nextDeadline == h.clock.now + .seconds(86_400))
        #expect(!h.record.isSilent(now: h.clock.now + .seconds(86_400) - oneMicro, configuration: h.configuration))
        #expect(h.record.isSilent(now: h.clock.now + .seconds(86_400), configuration: h.configuration))
    }

    @Test("fleetDegraded fires above 10% broken of at least 20 active devices and resolves below")
    func fleetDegraded() {
        let config = AlertConfiguration()
        var alerts = FleetAlerts()
        var counts = FleetCounts()
        counts.active = 20
        counts.activeBroken = 2
        #expect(alerts.evaluate(containerId: "c", counts: counts, now: t(1), configuration: config) == nil, "exactly 10% does not cross")
        counts.activeBroken = 3
        #expect(alerts.evaluate(containerId: "c", counts: counts, now: t(2), configuration: config)?.change == .fire)
        #expect(alerts.evaluate(containerId: "c", counts: counts, now: t(3), configuration: config) == nil, "fires once")
        counts.active = 19
        let resolve = alerts.evaluate(containerId: "c", counts: counts, now: t(4), configuration: config)
        #expect(resolve?.change == .resolve)
        #expect(resolve?.startsAt == t(2))
        #expect(resolve?.endsAt == t(4))
    }

    @Test("alert ids are deterministic per incident and differ between incidents")
    func alertIds() {
        let key = DeviceKey(appId: "a", deviceId: "d")
        let one = AlertIdentity.id(subject: .device(key), kind: .syncError, startsAt: t(1))
        #expect(one == AlertIdentity.id(subject: .device(key), kind: .syncError, startsAt: t(1)))
        #expect(one != AlertIdentity.id(subject: .device(key), kind: .syncError, startsAt: t(2)))
        #expect(one != AlertIdentity.id(subject: .device(key), kind: .notSyncing, startsAt: t(1)))
        #expect(one.hasPrefix("al_") && one.count == 35)
    }

    @Test("alert ids and stored line keys keep the form earlier versions wrote, so a firing alert resolves under its id")
    func storedFormsAreStable() {
        // Computed independently (FNV-1a over "d\u{1}a\u{1}d", kind and microseconds, each followed by a zero byte).
        #expect(
            AlertIdentity.id(subject: .device(DeviceKey(appId: "a", deviceId: "d")), kind: .syncError, startsAt: t(1))
                == "al_105791f5a18322b86746c23eba09f81b"
        )
        #expect(AlertIdentity.id(subject: .container("iCloud.x"), kind: .fleetDegraded, startsAt: t(1)) == "al_15d96b2ba4726d9e13e319189e717b01")
        #expect(AlertLine.device(DeviceKey(appId: "a", deviceId: "d"), .syncError).storageKey == "d\u{1}a\u{1}d\u{1}syncError")
        #expect(AlertLine.container("iCloud.x").storageKey == "c\u{1}iCloud.x")
    }
}

@Suite("Devices: attested as their last batch was, except while an alert fires")
struct DeviceAttestedTests {
    @Test(
        "a batch sets attested; while an attested device's alert fires, an unattested batch changes nothing and only its own attested batch resolves it; then the next batch sets it"
    )
    func attestedHoldsWhileFiring() {
        var f = EventFactory()
        var record = DeviceRecord(key: DeviceKey(appId: "com.example", deviceId: "dev-1"), firstSeenAt: t(1000))
        _ = record.ingest([f.network(true, at: t(1000))], info: DeviceInfo(), attested: true, now: t(1000))
        #expect(record.attested)
        let fired = record.ingest([f.failed(.export, at: t(1001), error: ckBadContainer)], info: DeviceInfo(), attested: true, now: t(1001))
        #expect(fired.transitions.map(\.change) == [.fire])
        // Anyone with the ingest key, unsigned: not applied, so it cannot clear the genuine device's alert.
        var forged = DeviceInfo()
        forged.appVersion = "9.9"
        let refused = record.ingest([f.started(.export, at: t(1002))], info: forged, attested: false, now: t(1002))
        #expect(refused.transitions.isEmpty && refused.applied == 0 && refused.stale == 1)
        #expect(record.syncError.firingSince != nil && record.info.appVersion == nil, "nothing of it applied")
        let resolved = record.ingest([f.started(.export, at: t(1003))], info: DeviceInfo(), attested: true, now: t(1003))
        #expect(resolved.transitions.map(\.change) == [.resolve])
        #expect(record.attested)
        _ = record.ingest([f.network(true, at: t(1004))], info: DeviceInfo(), attested: false, now: t(1004))
        #expect(!record.attested, "no alert fires: the next batch sets it")
    }
}
