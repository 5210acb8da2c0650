import SyncHealthMonitorFixtures
import Testing

@testable import SyncHealthCore

@Suite("Notification policy: flapping")
struct NotificationPolicyTests {
    func fire(_ at: Double) -> AlertTransition { AlertTransition(kind: .syncError, change: .fire, startsAt: t(at)) }
    func resolve(_ started: Double, _ at: Double) -> AlertTransition {
        AlertTransition(kind: .syncError, change: .resolve, startsAt: t(started), endsAt: t(at))
    }

    @Test("an alert that fires more than 3 times in an hour is told once as flapping, then held until it settles")
    func flapping() {
        var policy = NotificationPolicy()
        var decisions: [NotificationPolicy.Decision] = []
        for i in 0..<5 {
            let base = Double(i * 60)
            decisions.append(policy.decide(key: line("k"), transition: fire(base), now: t(base)))
            decisions.append(
                policy.decide(key: line("k"), transition: resolve(base, base + 30), now: t(base + 30))
            )
        }
        #expect(Array(decisions[0..<6]) == Array(repeating: NotificationPolicy.Decision.deliver(flapping: false), count: 6))
        #expect(decisions[6] == .deliver(flapping: true), "the 4th fire crosses the threshold: told once")
        #expect(decisions[7...].allSatisfy { $0 == .suppressFlapping })
        // Quiet for less than a window: still flapping, nothing to settle.
        #expect(policy.settle(now: t(270 + 3599)).isEmpty)
        #expect(policy.nextSettleTime == t(270 + 3600))
        // Settles after a quiet hour: ops last heard "fire", the alert is resolved now, so the resolve is delivered.
        let settled = policy.settle(now: t(270 + 3600))
        #expect(settled.map(\.key) == [line("k")])
        #expect(settled.first?.transition.change == .resolve)
        #expect(policy.lines.isEmpty, "an idle, resolved line is forgotten")
        #expect(
            policy.decide(key: line("k"), transition: fire(9000), now: t(9000)) == .deliver(flapping: false)
        )
    }

    @Test("a flapping alert that settles in the state ops already know sends nothing more")
    func settlesQuietly() {
        var policy = NotificationPolicy()
        for i in 0..<4 {
            let base = Double(i * 60)
            _ = policy.decide(key: line("k"), transition: fire(base), now: t(base))
            if i < 3 {
                _ = policy.decide(key: line("k"), transition: resolve(base, base + 30), now: t(base + 30))
            }
        }
        // Told "flapping" on the 4th fire, and it stayed firing.
        #expect(policy.settle(now: t(180 + 3600)).isEmpty)
    }
}
