import SyncHealthMonitorFixtures
import SyncHealthTestSupport
import Testing

@testable import SyncHealthCore

@Suite("Fleet counters")
struct FleetCounterPropertyTests {
    /// A random event for a device, from every kind the contract knows.
    static func randomBody(_ rng: inout SplitMix64) -> DeviceEvent.Body {
        let errors: [SyncErrorReport?] = [
            nil, ckNetworkFailure, ckBadContainer, ckQuota,
            SyncErrorReport(domain: "CKErrorDomain", code: 2, partialErrors: [14: 1, 26: 1]),
            SyncErrorReport(domain: "Other", code: 1),
        ]
        switch Int.random(in: 0..<10, using: &rng) {
        case 0..<5:
            let phase = Phase.allCases.randomElement(using: &rng) ?? .import
            let state = ActivityState.allCases.randomElement(using: &rng) ?? .started
            let error = state == .failed ? (errors.randomElement(using: &rng) ?? nil) : nil
            return .activity(.init(phase: phase, state: state, error: error))
        case 5, 6: return .network(available: Bool.random(using: &rng))
        case 7: return .account(AccountStatus.allCases.randomElement(using: &rng) ?? .available)
        case 8: return .pending(count: Int.random(in: 0..<3, using: &rng), oldestPendingAt: nil)
        default: return .heartbeat(clientSummary: nil)
        }
    }

    @Test("incremental counters equal a recount from scratch after random event streams", arguments: 0..<20)
    func incrementalEqualsRecount(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let configuration = AlertConfiguration()
        let apps = ["app.a", "app.b"]
        let containers: [String?] = [nil, "iCloud.one", "iCloud.two"]
        var devices: [DeviceKey: DeviceRecord] = [:]
        var contributions: [DeviceKey: FleetContribution] = [:]
        var deadlines: [DeviceKey: Timestamp] = [:]
        var counters = FleetCounters()
        var releases = ReleaseCounters()
        var now = t(0)
        var nextEventId = 0
        func count(_ key: DeviceKey, _ record: DeviceRecord) {
            let new = record.fleetContribution(now: now, configuration: configuration)
            counters.replace(contributions[key], with: new)
            releases.replace(contributions[key], with: new, firstSeenAt: record.firstSeenAt, lastSeenAt: record.lastSeenAt)
            contributions[key] = new
        }

        for step in 0..<400 {
            // Time moves on, sometimes by more than the silence window.
            now = now + .seconds(Int64.random(in: 0...(Bool.random(using: &rng) ? 60 : 40_000), using: &rng))
            // Due deadlines are served, as the service's timer would.
            for (key, due) in deadlines where due <= now {
                guard var record = devices[key] else { continue }
                let evaluation = record.evaluateAlerts(now: now, configuration: configuration)
                devices[key] = record
                deadlines[key] = evaluation.nextDeadline
                count(key, record)
            }
            // A random device posts a random batch.
            let key = DeviceKey(appId: apps.randomElement(using: &rng) ?? "app.a", deviceId: "d\(Int.random(in: 0..<12, using: &rng))")
            let info = DeviceInfo(
                containerId: containers.randomElement(using: &rng) ?? nil,
                osVersion: ["17.5", "18.0", nil].randomElement(using: &rng) ?? nil,
                appVersion: ["1.9", "2.0", "2.1", nil].randomElement(using: &rng) ?? nil
            )
            var record = devices[key] ?? DeviceRecord(key: key, firstSeenAt: now)
            let events = (0..<Int.random(in: 1...4, using: &rng)).map { _ -> DeviceEvent in
                nextEventId += 1
                let skew = Int64.random(in: -30...30, using: &rng)
                return DeviceEvent(eventId: "e\(nextEventId)", occurredAt: now + .seconds(skew), body: Self.randomBody(&rng))
            }
            let result = record.ingest(events, info: info, now: now, configuration: configuration)
            devices[key] = record
            deadlines[key] = result.nextDeadline
            count(key, record)

            if step % 20 == 0 || step == 399 {
                let recount = FleetCounters.recount(devices.values.map { $0.fleetContribution(now: now, configuration: configuration) })
                #expect(counters == recount, "seed \(seed) step \(step)")
                let releaseRecount = ReleaseCounters.recount(
                    devices.values.map { ($0.fleetContribution(now: now, configuration: configuration), $0.firstSeenAt, $0.lastSeenAt) }
                )
                for app in apps {
                    for dimension in ReleaseDimension.allCases {
                        let (kept, counted) = (releases.releases(appId: app, by: dimension), releaseRecount.releases(appId: app, by: dimension))
                        #expect(kept.mapValues(\.counts) == counted.mapValues(\.counts), "seed \(seed) step \(step) \(dimension)")
                        #expect(kept.mapValues(\.errors) == counted.mapValues(\.errors), "seed \(seed) step \(step) \(dimension)")
                        // Kept, a release remembers devices that left it; a recount knows only those still on it.
                        for (release, c) in counted {
                            #expect((kept[release]?.lastSeenAt ?? t(0)) >= (c.lastSeenAt ?? t(0)), "seed \(seed) step \(step)")
                            #expect((kept[release]?.firstSeenAt ?? t(0)) <= (c.firstSeenAt ?? t(0)), "seed \(seed) step \(step)")
                        }
                    }
                }
                let all = counters[.all]
                #expect(all.devices == devices.count)
                #expect(all.active + all.silent == all.devices)
                #expect(all.bySummaryCounts.reduce(0, +) == all.devices)
            }
        }
    }

    @Test("a device is counted in the whole fleet, its app, its container and its app's container")
    func scopes() {
        var counters = FleetCounters()
        let c = FleetContribution(appId: "a", containerId: "c", summary: .error, notSyncing: false, errorClass: .developer, silent: false)
        counters.replace(nil, with: c)
        for scope in [FleetScope.all, FleetScope(appId: "a"), FleetScope(containerId: "c"), FleetScope(appId: "a", containerId: "c")] {
            #expect(counters[scope].devices == 1)
            #expect(counters[scope].broken == 1)
            #expect(counters[scope].byErrorClass.first { $0.0 == .developer }?.1 == 1)
        }
        #expect(counters[FleetScope(appId: "b")].devices == 0)
        counters.replace(c, with: nil)
        #expect(counters[.all] == FleetCounts())
    }
}
