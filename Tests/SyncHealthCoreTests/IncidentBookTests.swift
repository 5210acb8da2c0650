import SyncHealthMonitorFixtures
import SyncHealthTestSupport
import Testing

@testable import SyncHealthCore

@Suite("Incidents: grouping, group wait and interval, resolve")
struct IncidentBookTests {
    static let key = IncidentKey(appId: "app", containerId: "c", kind: .syncError, signature: ErrorSignature(domain: "CKErrorDomain", code: 5))
    static var configuration: IncidentBook.Configuration {
        var c = IncidentBook.Configuration()
        c.groupWait = .seconds(30)
        c.groupInterval = .seconds(300)
        return c
    }

    static func group(_ devices: Int, since: Timestamp, version: String = "2.0") -> IncidentGroup {
        var g = IncidentGroup()
        for i in 0..<devices { g.add(deviceId: "d\(i)", appVersion: version, startsAt: since + .seconds(Int64(i % 3))) }
        return g
    }

    /// Runs steps as a store would: what a step writes is what the next reads.
    struct Run {
        var stored: [String: IncidentRecord] = [:]
        var told: [(IncidentBook.Notice, Int)] = []

        mutating func step(_ groups: [IncidentKey: IncidentGroup], at now: Timestamp) -> IncidentBook.Step {
            let step = IncidentBook.step(
                open: stored.values.filter { $0.state == .open },
                recent: Array(stored.values),
                groups: groups,
                now: now,
                configuration: configuration
            )
            for record in step.records {
                #expect(record.revision == (stored[record.id]?.revision ?? 0) + 1, "each write is one revision above what it read")
                stored[record.id] = record
            }
            told += step.notices.map { ($0.notice, $0.record.devices) }
            return step
        }
    }

    @Test("100 devices breaking within 3 s are one incident, told once after the group wait, then resolved once")
    func oneIncident() throws {
        var run = Run()
        let start = t(1000)
        _ = run.step([Self.key: Self.group(40, since: start)], at: start + .seconds(1))
        let waiting = run.step([Self.key: Self.group(100, since: start)], at: start + .seconds(3))
        #expect(run.told.isEmpty, "nothing before the group wait")
        #expect(waiting.nextWake == start + .seconds(30))
        _ = run.step([Self.key: Self.group(100, since: start)], at: start + .seconds(30))
        #expect(run.told.map(\.0) == [.opened] && run.told.first?.1 == 100, "one message naming 100 devices")
        let incident = try #require(run.stored.values.first)
        #expect(run.stored.count == 1 && incident.id == IncidentRecord.id(key: Self.key, openedAt: start))
        #expect(incident.samples.count == IncidentBook.sampleSize && incident.byVersion == ["2.0": 100])
        _ = run.step([Self.key: Self.group(100, since: start)], at: start + .seconds(60))
        #expect(run.told.count == 1, "nothing new to tell")
        _ = run.step([:], at: start + .seconds(90))
        #expect(run.told.map(\.0) == [.opened, .resolved])
        #expect(run.stored.values.first?.state == .resolved && run.stored.values.first?.resolvedAt == start + .seconds(90))
    }

    @Test("a changed count is told at most every group interval; an incident resolved before its wait is never told")
    func intervalAndQuietResolve() {
        var run = Run()
        let start = t(0)
        _ = run.step([Self.key: Self.group(10, since: start)], at: start + .seconds(30))
        _ = run.step([Self.key: Self.group(20, since: start)], at: start + .seconds(60))
        #expect(run.told.map(\.0) == [.opened], "an interval has not passed since the first message")
        let step = run.step([Self.key: Self.group(30, since: start)], at: start + .seconds(200))
        #expect(step.nextWake == start + .seconds(330))
        _ = run.step([Self.key: Self.group(30, since: start)], at: start + .seconds(330))
        #expect(run.told.map(\.0) == [.opened, .updated] && run.told.last?.1 == 30)

        var quiet = Run()
        _ = quiet.step([Self.key: Self.group(5, since: start)], at: start + .seconds(1))
        _ = quiet.step([:], at: start + .seconds(10))
        #expect(quiet.told.isEmpty)
        #expect(quiet.stored.values.first?.state == .resolved)
    }

    @Test("keys: the same error in one container is one incident; another code, container or kind is another")
    func keys() {
        let other = [
            IncidentKey(appId: "app", containerId: "c", kind: .syncError, signature: ErrorSignature(domain: "CKErrorDomain", code: 25)),
            IncidentKey(appId: "app", containerId: "c2", kind: .syncError, signature: ErrorSignature(domain: "CKErrorDomain", code: 5)),
            IncidentKey(appId: "app", containerId: "c", kind: .notSyncing, signature: ErrorSignature(domain: "CKErrorDomain", code: 5)),
        ]
        #expect(Set(other + [Self.key]).count == 4)
        #expect(other[2].signature == nil, "only syncError keeps the signature")
        var run = Run()
        let start = t(0)
        _ = run.step(Dictionary(uniqueKeysWithValues: (other + [Self.key]).map { ($0, Self.group(2, since: start)) }), at: start + .seconds(40))
        #expect(run.stored.count == 4 && run.told.count == 4)
    }

    @Test("two replicas stepping on the same counts decide the same records and ids")
    func deterministic() {
        let groups = [Self.key: Self.group(7, since: t(5))]
        let a = IncidentBook.step(open: [], groups: groups, now: t(40), configuration: Self.configuration)
        let b = IncidentBook.step(open: [], groups: groups, now: t(40), configuration: Self.configuration)
        #expect(a.records == b.records)
    }

    @Test("a key told opened a fourth time within an hour is flapping: told once, held open through quiet spells, resolved a window after")
    func flapping() throws {
        var run = Run()
        let window = NotificationPolicy.Configuration().flapWindow
        for k in 0..<3 {
            let start = t(Double(k) * 300)
            _ = run.step([Self.key: Self.group(5, since: start)], at: start + .seconds(30))
            _ = run.step([:], at: start + .seconds(100))
        }
        #expect(run.told.map(\.0) == [.opened, .resolved, .opened, .resolved, .opened, .resolved], "three opens in an hour are not flapping")
        #expect(run.stored.values.allSatisfy { $0.flappingSince == nil })

        _ = run.step([Self.key: Self.group(5, since: t(900))], at: t(930))
        let flapping = try #require(run.stored.values.first { $0.state == .open })
        #expect(flapping.flappingSince == t(930) && run.told.last?.0 == .opened)

        let quiet = run.step([:], at: t(1000))
        #expect(run.told.count == 7, "its devices recovering resolves nothing yet")
        #expect(run.stored[flapping.id]?.state == .open && run.stored[flapping.id]?.quietSince == t(1000))
        #expect(quiet.nextWake == t(1000) + window)

        _ = run.step([Self.key: Self.group(8, since: t(1200))], at: t(1230))
        _ = run.step([Self.key: Self.group(9, since: t(1200))], at: t(1600))
        #expect(run.told.count == 7, "breaking again joins the held incident; a flapping incident sends no updates")
        #expect(run.stored.count == 4 && run.stored[flapping.id]?.quietSince == nil && run.stored[flapping.id]?.devices == 9)

        _ = run.step([:], at: t(1700))
        _ = run.step([:], at: t(1700) + window - .seconds(1))
        #expect(run.stored[flapping.id]?.state == .open, "not yet quiet for a whole window")
        _ = run.step([:], at: t(1700) + window)
        #expect(run.told.map(\.0).suffix(2) == [.opened, .resolved] && run.told.count == 8)
        #expect(run.stored[flapping.id]?.state == .resolved && run.stored[flapping.id]?.resolvedAt == t(1700), "resolved as of when it went quiet")

        let later = t(1700) + window + .seconds(600)
        _ = run.step([Self.key: Self.group(5, since: later)], at: later + .seconds(30))
        #expect(run.stored.values.first { $0.state == .open }?.flappingSince == nil, "a window after the opens, the key is not flapping")
    }

    @Test("an incident keeps its count over time: a point each step it changed, the resolve's zero, at most the limit over its whole life")
    func history() throws {
        var run = Run()
        let start = t(0)
        for (k, devices) in [10, 10, 40, 100, 100, 60].enumerated() {
            _ = run.step([Self.key: Self.group(devices, since: start)], at: start + .seconds(Int64(k) * 10 + 1))
        }
        _ = run.step([:], at: start + .seconds(100))
        let incident = try #require(run.stored.values.first)
        #expect(incident.history.map(\.devices) == [10, 40, 100, 60, 0])
        #expect(incident.history.map(\.at) == [t(1), t(21), t(31), t(51), t(100)])

        var long = IncidentRecord(id: "in_x", key: Self.key, openedAt: start)
        for k in 1...200 {
            long.devices = k
            long.record(now: start + .seconds(Int64(k)))
        }
        #expect(long.history.count <= IncidentBook.historyLimit && long.history.count > IncidentBook.historyLimit / 2)
        #expect(long.history.first?.devices == 1 && long.history.last?.devices == 200, "it still spans the whole incident")
        #expect(long.history.map(\.at) == long.history.map(\.at).sorted())
    }
}
