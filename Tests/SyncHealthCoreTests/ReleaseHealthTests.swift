import SyncHealthMonitorFixtures
import SyncHealthTestSupport
import Testing

@testable import SyncHealthCore

@Suite("Release health")
struct ReleaseHealthTests {
    /// A release with `active` active devices, `broken` of them with `error`.
    static func release(active: Int, broken: Int, error: SyncErrorReport = ckBadContainer) -> ReleaseCounts {
        var r = ReleaseCounts()
        for i in 0..<active {
            let isBroken = i < broken
            r.add(
                FleetContribution(
                    appId: "app",
                    containerId: "c",
                    summary: isBroken ? .error : .succeeded,
                    notSyncing: false,
                    errorClass: isBroken ? error.errorClass : nil,
                    silent: false,
                    error: isBroken ? error : nil
                ),
                1
            )
        }
        return r
    }

    @Test("2.0 broken on 60 of 100 devices against 1.9 on 2 of 100 is a regression, compared with 1.9")
    func regression() throws {
        let findings = ReleaseRegression.evaluate(
            ["1.9": Self.release(active: 100, broken: 2), "2.0": Self.release(active: 100, broken: 60)],
            minimumDevices: 50
        )
        let finding = try #require(findings["2.0"])
        #expect(finding.previous == "1.9")
        #expect(finding.share == 0.6 && finding.previousShare == 0.02)
        #expect(finding.z > ReleaseRegression.criticalZ)
        #expect(findings["1.9"] == nil, "the oldest release has nothing to be compared with")
    }

    @Test("equal shares, fewer active devices than the minimum, or less than twice the share give no regression")
    func noRegression() {
        #expect(
            ReleaseRegression.evaluate(
                ["1.9": Self.release(active: 100, broken: 30), "2.0": Self.release(active: 100, broken: 30)],
                minimumDevices: 50
            ).isEmpty
        )
        #expect(
            ReleaseRegression.evaluate(
                ["1.9": Self.release(active: 100, broken: 2), "2.0": Self.release(active: 49, broken: 40)],
                minimumDevices: 50
            ).isEmpty
        )
        // Significant (z ≈ 7) but not twice the share: 60% against 40%, on many devices.
        let many = ReleaseRegression.evaluate(
            ["1.9": Self.release(active: 600, broken: 240), "2.0": Self.release(active: 600, broken: 360)],
            minimumDevices: 50
        )
        #expect(many.isEmpty)
        // Twice the share but not significant: 4 of 50 against 2 of 50.
        #expect(
            ReleaseRegression.evaluate(["1.9": Self.release(active: 50, broken: 2), "2.0": Self.release(active: 50, broken: 4)], minimumDevices: 50)
                .isEmpty
        )
        #expect(ReleaseRegression.evaluate(["2.0": Self.release(active: 100, broken: 100)], minimumDevices: 50).isEmpty, "nothing to compare with")
    }

    @Test("the previous release is the greatest below with an active device: 1.10 comes after 1.9, unnamed releases are skipped")
    func previousRelease() throws {
        let findings = ReleaseRegression.evaluate(
            [
                "1.9": Self.release(active: 100, broken: 1),
                "1.10": Self.release(active: 100, broken: 70),
                "1.9.5": ReleaseCounts(),
                "": Self.release(active: 100, broken: 0),
            ],
            minimumDevices: 50
        )
        #expect(try #require(findings["1.10"]).previous == "1.9")
        #expect(findings.count == 1)
        #expect(
            ["1.10", "1.9", "2.0-beta", "1.9.1", "10.0", "2.0"].sorted(by: ReleaseOrder.less) == ["1.9", "1.9.1", "1.10", "2.0-beta", "2.0", "10.0"]
        )
    }

    @Test("a release counts its devices' worst errors by signature, most first")
    func topErrors() {
        var r = Self.release(active: 3, broken: 3, error: ckQuota)
        r.add(
            FleetContribution(
                appId: "app",
                containerId: nil,
                summary: .error,
                notSyncing: false,
                errorClass: .developer,
                silent: true,
                error: ckBadContainer
            ),
            1
        )
        let top = r.topErrors(limit: 5)
        #expect(top.map(\.signature) == [ErrorSignature(ckQuota), ErrorSignature(ckBadContainer)])
        #expect(top.map(\.devices) == [3, 1])
        #expect(r.brokenShare == 1.0, "the share counts active devices only")
        #expect(r.counts.devices == 4)
    }

    @Test("a device's worst visible error is the one its class comes from")
    func worstError() {
        var f = EventFactory()
        let m = fold([
            f.network(true, at: t(0)), f.failed(.import, at: t(1), error: ckNetworkFailure), f.failed(.export, at: t(2), error: ckBadContainer),
        ])
        #expect(m.worstSyncError == ckBadContainer)
        #expect(m.worstSyncError?.errorClass == m.syncErrorClass)
    }

    @Test("a regression without a firing alert fires, a firing alert without a regression resolves with its start, the rest is unchanged")
    func regressionChanges() {
        let (a, b, c) = (
            ReleaseKey(appId: "app", version: "2.0"), ReleaseKey(appId: "app", version: "1.10"), ReleaseKey(appId: "app", version: "1.9")
        )
        let finding = ReleaseRegression.Finding(previous: "1.9", share: 0.6, previousShare: 0.02, z: 8)
        let now = t(100)
        let changes = ReleaseRegression.changes(firing: [b: t(10), c: t(20)], findings: [a: finding, c: finding], now: now)
        #expect(changes.map(\.key) == [b, a], "in release order: 1.10 before 2.0; 1.9 fires and is found: unchanged")
        #expect(changes[0].transition == AlertTransition(kind: .releaseRegression, change: .resolve, startsAt: t(10), endsAt: now))
        #expect(changes[0].finding == nil)
        #expect(changes[1].transition == AlertTransition(kind: .releaseRegression, change: .fire, startsAt: now))
        #expect(changes[1].finding == finding)
        #expect(ReleaseRegression.changes(firing: [:], findings: [:], now: now).isEmpty)
    }
}

@Suite("Release alerts that flap")
struct ReleaseFlappingTests {
    static let release = ReleaseKey(appId: "app", version: "2.0")

    @Test("a fire is flapping when more than the threshold fired within the window, itself included")
    func flappingFires() {
        let flapping = ReleaseFlapping(configuration: NotificationPolicy.Configuration())
        #expect(!flapping.isFlapping(firesAt: t(3000), before: [t(100), t(200)]), "the third fire")
        #expect(flapping.isFlapping(firesAt: t(3000), before: [t(100), t(200), t(300)]), "the fourth")
        #expect(!flapping.isFlapping(firesAt: t(3000), before: [t(-700), t(200), t(300)]), "one fired more than an hour before")
        #expect(!flapping.isFlapping(firesAt: t(300), before: [t(100), t(200), t(300), t(400)]), "only fires before it count")
    }

    @Test("a flapping release is held until quiet for a window; a finding again restarts the wait; others are never held")
    func holds() {
        var flapping = ReleaseFlapping(configuration: NotificationPolicy.Configuration())
        let other = ReleaseKey(appId: "app", version: "1.9")
        let firing: Set = [Self.release, other]
        #expect(flapping.held(firing: firing, flapping: [Self.release], findings: [], now: t(0)) == [Self.release: t(3600)])
        #expect(flapping.held(firing: firing, flapping: [Self.release], findings: [], now: t(1800)) == [Self.release: t(3600)])
        #expect(flapping.held(firing: firing, flapping: [Self.release], findings: [Self.release], now: t(2000)).isEmpty)
        #expect(flapping.held(firing: firing, flapping: [Self.release], findings: [], now: t(2100)) == [Self.release: t(5700)])
        #expect(flapping.held(firing: firing, flapping: [Self.release], findings: [], now: t(5700)).isEmpty, "quiet for a window: it resolves")
        #expect(flapping.quietSince[Self.release] == t(2100), "the resolve's time")
        _ = flapping.held(firing: [], flapping: [], findings: [], now: t(5800))
        #expect(flapping.quietSince.isEmpty, "forgotten once it no longer fires")
    }
}
