import SyncHealthMonitorFixtures
import SyncHealthTestSupport
import Testing

@testable import SyncHealthCore

/// The policy as it was before its settle queue: every `settle` and `nextSettleTime` scanned every line. Kept as
/// the reference the queued policy must agree with; a copy on purpose, sharing no code with what it checks.
struct ReferencePolicy {
    var configuration = NotificationPolicy.Configuration()
    var lines: [AlertLine: NotificationPolicy.Line] = [:]

    mutating func decide(key: AlertLine, transition: AlertTransition, now: Timestamp) -> NotificationPolicy.Decision {
        var line = lines[key] ?? NotificationPolicy.Line()
        let windowStart = now - configuration.flapWindow
        line.fires.removeAll { $0 < windowStart }
        if transition.change == .fire { line.fires.append(now) }
        line.last = transition
        line.lastAt = now
        defer { lines[key] = line }
        if line.flappingSince != nil { return .suppressFlapping }
        if line.fires.count > configuration.flapThreshold {
            line.flappingSince = now
            line.lastDelivered = transition.change
            return .deliver(flapping: true)
        }
        line.lastDelivered = transition.change
        return .deliver(flapping: false)
    }

    mutating func settle(now: Timestamp) -> [(key: AlertLine, transition: AlertTransition)] {
        var deliver: [(AlertLine, AlertTransition)] = []
        for (key, var line) in lines {
            guard let lastAt = line.lastAt, now >= lastAt + configuration.flapWindow else { continue }
            if line.flappingSince != nil, let last = line.last, last.change != line.lastDelivered {
                deliver.append((key, last))
            }
            line.flappingSince = nil
            line.fires.removeAll()
            if line.last?.change == .resolve || line.last == nil {
                lines[key] = nil
            } else {
                line.lastDelivered = line.last?.change
                lines[key] = line
            }
        }
        return deliver.sorted { $0.0 < $1.0 }
    }

    var nextSettleTime: Timestamp? {
        lines.values.compactMap { line in line.flappingSince != nil || !line.fires.isEmpty ? line.lastAt.map { $0 + configuration.flapWindow } : nil }
            .min()
    }
}

/// A random sequence of calls on a policy: decides on a few lines, settles.
struct PolicyScript {
    var random: SplitMix64
    var now = t(0)

    enum Call {
        case decide(key: AlertLine, transition: AlertTransition, now: Timestamp)
        case settle(now: Timestamp)
    }

    mutating func next() -> Call {
        // Steps from a second to 40 minutes, so that windows of an hour open and close often.
        now = now + .seconds(Int64(random.next() % 2400) + 1)
        switch random.next() % 10 {
        case 0...5:
            let key = line("k\(random.next() % 6)")
            let change: AlertTransition.Change = random.next() % 2 == 0 ? .fire : .resolve
            let transition = AlertTransition(kind: .syncError, change: change, startsAt: now - .seconds(10), endsAt: change == .resolve ? now : nil)
            return .decide(key: key, transition: transition, now: now)
        default:
            return .settle(now: now)
        }
    }
}

/// What a call answered, comparable across implementations.
enum Answer: Equatable {
    case decision(NotificationPolicy.Decision)
    case settled([AlertLine], [AlertTransition])
}

/// The calls a script makes, on either policy.
protocol PolicyCalls {
    mutating func decide(key: AlertLine, transition: AlertTransition, now: Timestamp) -> NotificationPolicy.Decision
    mutating func settle(now: Timestamp) -> [(key: AlertLine, transition: AlertTransition)]
}

extension NotificationPolicy: PolicyCalls {}
extension ReferencePolicy: PolicyCalls {}

extension PolicyCalls {
    mutating func run(_ call: PolicyScript.Call) -> Answer {
        switch call {
        case .decide(let key, let transition, let now):
            return .decision(decide(key: key, transition: transition, now: now))
        case .settle(let now):
            let settled = settle(now: now)
            return .settled(settled.map(\.key), settled.map(\.transition))
        }
    }
}

/// A line without its queue bookkeeping.
func visible(_ line: NotificationPolicy.Line) -> [String] {
    [
        "\(line.fires)", "\(String(describing: line.flappingSince))", "\(String(describing: line.last))",
        "\(String(describing: line.lastDelivered))", "\(String(describing: line.lastAt))",
    ]
}

@Suite("Notification policy: the settle queue and taking back a group's changes")
struct NotificationPolicyQueueTests {
    @Test("the queued policy answers every call as the scanning one did, and never wants settling later", arguments: [1, 2, 3, 4, 5] as [UInt64])
    func agreesWithScanning(seed: UInt64) {
        var script = PolicyScript(random: SplitMix64(seed: seed))
        var policy = NotificationPolicy()
        var reference = ReferencePolicy()
        for step in 0..<3_000 {
            let call = script.next()
            let answer = policy.run(call)
            #expect(answer == reference.run(call), "step \(step)")
            #expect(
                Dictionary(uniqueKeysWithValues: policy.lines.map { ($0.key, visible($0.value)) }) == reference.lines.mapValues(visible),
                "step \(step)"
            )
            if let due = reference.nextSettleTime {
                #expect(policy.nextSettleTime.map { $0 <= due } == true, "a line due to settle is never waited past")
            }
        }
    }

    @Test("changes taken back leave the policy as it was, and it goes on as if they never happened", arguments: [11, 12, 13] as [UInt64])
    func discardRestores(seed: UInt64) {
        var script = PolicyScript(random: SplitMix64(seed: seed))
        var policy = NotificationPolicy()
        for _ in 0..<200 { _ = policy.run(script.next()) }
        let before = policy
        #expect(!policy.hasChanges, "nothing recorded before beginChanges")
        policy.beginChanges()
        #expect(!policy.hasChanges)
        var group = script
        for _ in 0..<30 { _ = policy.run(group.next()) }
        #expect(policy != before, "the group changed something")
        #expect(policy.hasChanges)
        policy.discardChanges()
        #expect(policy == before)
        #expect(!policy.hasChanges)
        // The same later calls on both give the same answers (the queue was put back too).
        var untouched = before
        var later = group
        for step in 0..<1_000 {
            let call = later.next()
            #expect(policy.run(call) == untouched.run(call), "step \(step)")
        }
        #expect(policy == untouched)
    }

    @Test("changes kept are the same as changes made without recording them")
    func keepIsPlain() {
        var script = PolicyScript(random: SplitMix64(seed: 21))
        var recorded = NotificationPolicy()
        var plain = NotificationPolicy()
        for round in 0..<100 {
            recorded.beginChanges()
            for _ in 0..<10 {
                let call = script.next()
                #expect(recorded.run(call) == plain.run(call), "round \(round)")
            }
            recorded.keepChanges()
        }
        #expect(recorded == plain)
        recorded.discardChanges()
        #expect(recorded == plain, "nothing to take back once kept")
    }
}
