import Foundation
import Logging
import NIOCore
import SyncHealthCore
import SyncHealthEngineTesting
import SyncHealthPostgres
import SyncHealthSQLite
import SyncHealthStore
import SyncHealthTestSupport
import SyncHealthWebhooks
import Synchronization
import Testing

@testable import SyncHealthEngine

/// The engine against the delivery model (`DeliveryModel`) over seeded random histories: every subscription gets
/// what the model says, nothing lost, nothing doubled, one line's messages in order; PagerDuty's resolves each have
/// their trigger; Alertmanager holds in the end what fires. On a mismatch the test prints the seed and the shortest
/// history it finds that still fails.
///
/// `SYNCHEALTH_ALERT_MODEL_HISTORIES` (histories per store), `SYNCHEALTH_ALERT_MODEL_SEED` (the first seed) and
/// `SYNCHEALTH_ALERT_MODEL_STORES` (`memory,sqlite,postgres`) make a long run of it: `scripts/alert-model`.
@Suite("Alerts are told once: the engine against the delivery model over random histories", .serialized)
struct DeliveryModelTests {
    /// Histories per store in the suite: a few hundred in all, under a minute.
    static func histories(_ store: EngineStore) -> Int {
        if let text = ProcessInfo.processInfo.environment["SYNCHEALTH_ALERT_MODEL_HISTORIES"], let n = Int(text) { return n }
        return switch store {
        case .memory: 200
        case .sqlite: 60
        case .postgres: 20
        }
    }

    static var firstSeed: UInt64 {
        ProcessInfo.processInfo.environment["SYNCHEALTH_ALERT_MODEL_SEED"].flatMap { UInt64($0) } ?? 0x5EED_0064
    }

    @Test("random histories of fires, resolves, silences, time and restarts deliver what the model says", arguments: EngineStore.withShared)
    func randomHistories(store: EngineStore) async throws {
        if let stores = ProcessInfo.processInfo.environment["SYNCHEALTH_ALERT_MODEL_STORES"],
            !stores.split(separator: ",").contains(Substring(store.rawValue))
        {
            return
        }
        let count = Self.histories(store)
        var totals = DeliveryCheck.Totals()
        for i in 0..<count {
            let seed = Self.firstSeed &+ UInt64(i)
            let history = Self.history(seed: seed, store: store)
            guard let expected = DeliveryModel.outcome(of: history) else {
                Issue.record("seed \(seed): the generator drew a history the model does not judge")
                continue
            }
            let check = try await DeliveryPlayer.check(history, expected: expected, on: store)
            totals.add(check)
            if let mismatch = check.mismatch {
                let shortest = try await Self.shrink(history, on: store)
                Issue.record(
                    "seed \(seed) on \(store.rawValue): \(mismatch)\nhistory:\n\(history)\nshortest history found failing:\n\(shortest)"
                )
                return
            }
        }
        print(
            "alert model on \(store.rawValue): \(count) histories, \(totals.expected) messages expected, \(totals.delivered) delivered, "
                + "\(totals.lost) lost, \(totals.doubled) doubled"
        )
        #expect(totals.expected > 0, "the histories told something")
    }

    static func history(seed: UInt64, store: EngineStore) -> AlertHistory {
        var rng = SplitMix64(seed: seed)
        return AlertHistory.random(steps: Int.random(in: 8...36, using: &rng), restarts: store != .memory, using: &rng)
    }

    /// The shortest history found, by dropping one step or subscription at a time while it still fails.
    static func shrink(_ history: AlertHistory, on store: EngineStore) async throws -> AlertHistory {
        var current = history
        var tries = 0
        var smaller = true
        while smaller, tries < 400 {
            smaller = false
            for candidate in current.shrunk {
                tries += 1
                guard let expected = DeliveryModel.outcome(of: candidate) else { continue }
                if try await DeliveryPlayer.check(candidate, expected: expected, on: store).mismatch != nil {
                    current = candidate
                    smaller = true
                    break
                }
            }
        }
        return current
    }
}

/// What one history's deliveries were, against the model.
struct DeliveryCheck {
    struct Totals {
        var expected = 0
        var delivered = 0
        var lost = 0
        var doubled = 0

        mutating func add(_ check: DeliveryCheck) {
            expected += check.expected
            delivered += check.delivered
            lost += check.lost
            doubled += check.doubled
        }
    }

    var expected = 0
    var delivered = 0
    var lost = 0
    var doubled = 0
    var mismatch: String?
}

/// Plays a history on the engine, with a manual clock and a recording transport, and reads the deliveries back.
enum DeliveryPlayer {
    static func url(_ subscription: Int) -> String { "http://127.0.0.1:9/s\(subscription)/" }

    static func check(_ history: AlertHistory, expected: ModelOutcome, on store: EngineStore) async throws -> DeliveryCheck {
        let transport = RecordingTransport()
        let clock = ManualClock(testStart)
        try await play(history, on: store, clock: clock, transport: transport)
        return compare(history, expected: expected, requests: transport.sent.withLock { $0 }, now: clock.now)
    }

    // MARK: Playing

    /// What the player keeps across restarts.
    final class Progress: @unchecked Sendable {
        /// The model's time, in whole seconds from the start.
        var second = 0
        /// Per device, events sent (for their ids and times).
        var events: [Int: Int] = [:]
        var silenceIds: [String] = []
    }

    static func configuration() -> EngineConfiguration {
        var configuration = EngineConfiguration()
        configuration.incidents.groupWait = .seconds(30)
        return configuration
    }

    static func play(_ history: AlertHistory, on kind: EngineStore, clock: ManualClock, transport: RecordingTransport) async throws {
        // The steps between restarts, and the final wait.
        var split: [[AlertHistory.Step]] = [[]]
        for step in history.steps {
            if step == .restart { split.append([]) } else { split[split.count - 1].append(step) }
        }
        split[split.count - 1].append(.advance(minutes: DeliveryModel.finalMinutes))
        let segments = split
        let progress = Progress()
        @Sendable func harness(_ store: MonitorStore) -> EngineHarness {
            EngineHarness(
                store: store,
                clock: clock,
                configuration: configuration(),
                webhooks: .privateAllowed,
                transport: transport,
                drivenDecisions: true
            )
        }
        switch kind {
        case .memory:
            try await harness(.local(InMemoryStore())).run { h in
                try await subscribe(history, h)
                for segment in segments { try await play(segment, on: h, progress) }
                try await finish(h)
            }
        case .sqlite:
            let directory = temporaryDirectory()
            for (index, segment) in segments.enumerated() {
                let store = MonitorStore.local(try SQLiteStore(directory: directory, synchronous: .normal, eventIdGeneration: .seconds(1)))
                try await harness(store).run { h in
                    if index == 0 { try await subscribe(history, h) }
                    try await play(segment, on: h, progress)
                    if index == segments.count - 1 { try await finish(h) }
                }
            }
        case .postgres:
            // Two replicas from the start; the first takes the steps until the first restart, and stops there with
            // its outbox as it stands; the other takes the rest and delivers what the first left.
            let url = try await PostgresTesting.freshDatabase()
            let first = segments[0]
            let rest = Array(segments.dropFirst().joined())
            try await harness(.shared(try PostgresStore(url: url, logger: testLogger()))).run { b in
                try await harness(.shared(try PostgresStore(url: url, logger: testLogger()))).run { a in
                    try await subscribe(history, a)
                    try await play(first, on: a, progress)
                }
                // The other replica reads the silences the first changed, as its next poll would (every
                // `sharedPollInterval`): the model judges what replicas tell once they have read each other's
                // changes, not what one decides within that interval.
                try await b.delivery.silences.refreshIfShared()
                try await play(rest, on: b, progress)
                try await finish(b)
            }
        }
    }

    static func subscribe(_ history: AlertHistory, _ h: EngineHarness) async throws {
        for (index, subscription) in history.subscriptions.enumerated() {
            var fields = WebhookRequestFields(url: url(index))
            fields.kinds = subscription.kinds
            fields.appIds = subscription.app.map { [AlertHistory.apps[$0]] } ?? []
            switch subscription.format {
            case .standard: break
            case .standardIncident: fields.grouping = "incident"
            case .slack: fields.format = "slack"
            case .pagerduty:
                fields.format = "pagerduty"
                fields.routingKey = "R"
            case .alertmanager: fields.format = "alertmanager"
            }
            _ = try await h.delivery.webhooks.create(fields)
        }
    }

    static func play(_ steps: [AlertHistory.Step], on h: EngineHarness, _ progress: Progress) async throws {
        let logger = testLogger()
        for step in steps {
            // Each step at an instant of its own (a microsecond on), so that the order of steps within one second of
            // the model is the order of their times.
            if case .advance = step {} else { h.clock.advance(by: .microseconds(1)) }
            switch step {
            case .fail(let device, let code):
                try await h.post(
                    body(
                        device,
                        [
                            (#""kind": "network", "available": true"#),
                            (#""kind": "activity", "phase": "export", "state": "failed", "error": {"domain": "CKErrorDomain", "code": \#(code)}"#),
                        ],
                        progress
                    )
                )
            case .recover(let device):
                try await h.post(body(device, [#""kind": "activity", "phase": "export", "state": "succeeded""#], progress))
            case .silence(let matcher, let minutes):
                let matchers =
                    switch matcher {
                    case .app(let app): Silence.Matchers(appId: AlertHistory.apps[app])
                    case .device(let device): Silence.Matchers(deviceId: AlertHistory.deviceId(device))
                    case .kind: Silence.Matchers(kind: .syncError)
                    }
                let endsAt = testStart + .seconds(Int64(progress.second + minutes * 60))
                let silence = try await h.delivery.silences.create(matchers: matchers, startsAt: nil, endsAt: endsAt, comment: "")
                progress.silenceIds.append(silence.id)
            case .endSilence(let n):
                _ = try await h.delivery.silences.expire(progress.silenceIds[n])
                try await SilenceRelease(engine: h.engine, delivery: h.delivery, logger: logger).releaseEnded()
            case .advance(let minutes):
                // Deliveries under way end before time jumps: a jump past a PostgreSQL delivery lease (60 s) while a
                // replica still sends would let the other take the message too, which real time does not allow
                // (a delivery gives up after 15 s).
                try await drain(h)
                progress.second += minutes * 60
                try await h.clock.advanceAndSettle(by: testStart + .seconds(Int64(progress.second)) - h.clock.now)
                try await IncidentWatch(engine: h.engine, delivery: h.delivery, logger: logger).step()
                try await SilenceRelease(engine: h.engine, delivery: h.delivery, logger: logger).releaseEnded()
            case .restart:
                break
            }
        }
    }

    /// Every message delivered, then Alertmanager's refresh (after the messages, as the service's refresh a minute
    /// on would be: a resolve of an earlier alert delivered after it would end the firing one there).
    static func finish(_ h: EngineHarness) async throws {
        try await drain(h)
        await AlertmanagerRefresh(engine: h.engine, delivery: h.delivery, logger: testLogger()).refresh()
    }

    /// Waits until every message written is delivered. Messages another replica wrote are found at the loop's next
    /// look: it is told to look now.
    static func drain(_ h: EngineHarness) async throws {
        // Looked at every millisecond: most messages are out within one, and a long run plays many histories.
        for attempt in 0..<5_000 {
            if attempt.isMultiple(of: 100) { h.delivery.outbox.notify() }
            if try await outboxDrained(h.store) { return }
            try await Task.sleep(for: .milliseconds(1))
        }
        throw TimedOut()
    }

    /// A device's request: its events, each a millisecond after its last. A device's first request starts it
    /// healthy, so that its state is never unknown (which would raise `syncStalled`).
    static func body(_ device: Int, _ events: [String], _ progress: Progress) -> ByteBuffer {
        let app = AlertHistory.apps[AlertHistory.app(of: device)]
        let id = AlertHistory.deviceId(device)
        let healthy = [
            #""kind": "account", "status": "available""#,
            #""kind": "activity", "phase": "setup", "state": "succeeded""#,
            #""kind": "activity", "phase": "import", "state": "succeeded""#,
            #""kind": "activity", "phase": "export", "state": "succeeded""#,
        ]
        let json = (progress.events[device] == nil ? healthy + events : events).map { fields -> String in
            let n = progress.events[device, default: 0]
            progress.events[device] = n + 1
            let at = testStart + .seconds(Int64(progress.second)) + .milliseconds(Int64(n))
            return event("e\(n)", at.rfc3339, fields)
        }
        return ByteBuffer(
            string:
                #"{"device": {"deviceId": "\#(id)", "appId": "\#(app)", "containerId": "iCloud.\#(app)"}, "events": [\#(json.joined(separator: ","))]}"#
        )
    }

    // MARK: Reading back

    /// A line: one device's alerts, or one incident key's incidents.
    enum Line: Hashable, CustomStringConvertible {
        case device(Int)
        case incident(app: Int, code: Int)

        var description: String {
            switch self {
            case .device(let d): "device d\(d)"
            case .incident(let a, let c): "incidents a\(a)/\(c)"
            }
        }
    }

    static func line(of message: ModelMessage) -> Line {
        switch message {
        case .fire(let d, _), .resolve(let d, _): .device(d)
        case .opened(let a, let c), .resolved(let a, let c): .incident(app: a, code: c)
        }
    }

    static func compare(_ history: AlertHistory, expected: ModelOutcome, requests: [WebhookRequest], now: Timestamp) -> DeliveryCheck {
        var check = DeliveryCheck()
        var problems: [String] = []
        var got: [[ModelMessage]] = Array(repeating: [], count: history.subscriptions.count)
        var alertmanagerEnds: [Int: [Int: Timestamp]] = [:]
        // PagerDuty: each dedup key's incident key, and whether it was resolved.
        var pagerDutyKeys: [Int: [String: (app: Int, code: Int)]] = [:]
        var openKeys: [Int: Set<Line>] = [:]
        // The alerts behind each line's deliveries, for the report.
        var raw: [Int: [Line: [String]]] = [:]
        for request in requests {
            guard let index = history.subscriptions.indices.first(where: { request.url.hasPrefix(url($0)) }) else {
                problems.append("a delivery to an unknown URL \(request.url)")
                continue
            }
            let json = try? JSONSerialization.jsonObject(with: Data(request.body))
            let format = history.subscriptions[index].format
            func incident(_ notice: String, app: Int?, code: Int?) {
                guard let app, let code else { return problems.append("s\(index): an incident message without its key: \(json ?? "")") }
                let line = Line.incident(app: app, code: code)
                switch notice {
                case "opened":
                    got[index].append(.opened(app: app, code: code))
                    openKeys[index, default: []].insert(line)
                case "resolved":
                    got[index].append(.resolved(app: app, code: code))
                    openKeys[index, default: []].remove(line)
                default:
                    if openKeys[index]?.contains(line) != true { problems.append("s\(index): an update of \(line) that is not open") }
                }
            }
            switch format {
            case .standard:
                guard let body = json as? [String: Any], let data = body["data"] as? [String: Any] else {
                    problems.append("s\(index): an unreadable body")
                    continue
                }
                guard data["kind"] as? String == "syncError", let device = Self.device(data["deviceId"]), let second = Self.second(data["startsAt"])
                else {
                    problems.append("s\(index): an alert the history does not raise: \(data)")
                    continue
                }
                let message: ModelMessage =
                    body["type"] as? String == "alert.firing" ? .fire(device: device, second: second) : .resolve(device: device, second: second)
                got[index].append(message)
                raw[index, default: [:]][.device(device), default: []].append("\(message) \(data["id"] ?? "") from \(data["startsAt"] ?? "")")
            case .standardIncident:
                guard let body = json as? [String: Any], let data = body["data"] as? [String: Any], let type = body["type"] as? String else {
                    problems.append("s\(index): an unreadable body")
                    continue
                }
                let app = AlertHistory.apps.firstIndex(of: data["appId"] as? String ?? "")
                incident(String(type.dropFirst("incident.".count)), app: app, code: (data["error"] as? [String: Any])?["code"] as? Int)
            case .slack:
                let text = (json as? [String: Any])?["text"] as? String ?? ""
                let notice = text.hasPrefix("🔴") ? "opened" : text.hasPrefix("✅") ? "resolved" : "updated"
                incident(notice, app: Self.app(in: text), code: Self.code(in: text))
            case .pagerduty:
                guard let body = json as? [String: Any], let key = body["dedup_key"] as? String else {
                    problems.append("s\(index): an unreadable body")
                    continue
                }
                if body["event_action"] as? String == "resolve" {
                    guard let incidentKey = pagerDutyKeys[index]?[key] else {
                        problems.append("s\(index): a PagerDuty resolve without its trigger (\(key))")
                        continue
                    }
                    incident("resolved", app: incidentKey.app, code: incidentKey.code)
                } else if let known = pagerDutyKeys[index]?[key] {
                    incident("updated", app: known.app, code: known.code)
                } else {
                    let summary = (body["payload"] as? [String: Any])?["summary"] as? String ?? ""
                    guard let app = Self.app(in: summary), let code = Self.code(in: summary) else {
                        problems.append("s\(index): a trigger without its key: \(summary)")
                        continue
                    }
                    pagerDutyKeys[index, default: [:]][key] = (app, code)
                    incident("opened", app: app, code: code)
                }
            case .alertmanager:
                for alert in json as? [[String: Any]] ?? [] {
                    let labels = alert["labels"] as? [String: String] ?? [:]
                    guard labels["alertname"] == "syncError", let device = Self.device(labels["device_id"]),
                        let endsAt = (alert["endsAt"] as? String).flatMap({ Timestamp(rfc3339: $0) })
                    else {
                        problems.append("s\(index): an Alertmanager alert the history does not raise: \(alert)")
                        continue
                    }
                    alertmanagerEnds[index, default: [:]][device] = endsAt
                }
            }
        }
        for index in history.subscriptions.indices {
            let want = Dictionary(grouping: expected.messages[index], by: line(of:))
            let have = Dictionary(grouping: got[index], by: line(of:))
            check.expected += expected.messages[index].count
            check.delivered += got[index].count
            for line in Set(want.keys).union(have.keys) {
                let w = want[line] ?? []
                let h = have[line] ?? []
                guard w != h else { continue }
                // Counted as the model's messages missing, and the deliveries beyond them.
                var left = h
                for m in w { if let i = left.firstIndex(of: m) { left.remove(at: i) } else { check.lost += 1 } }
                check.doubled += left.count
                problems.append(
                    "s\(index) (\(history.subscriptions[index].format.rawValue)) \(line): expected \(w), delivered \(h) \(raw[index]?[line] ?? [])"
                )
            }
        }
        for (index, devices) in expected.alertmanagerFiring {
            let holds = Set((alertmanagerEnds[index] ?? [:]).filter { $0.value > now }.keys)
            if holds != devices { problems.append("s\(index) (alertmanager) holds \(holds.sorted()) firing, expected \(devices.sorted())") }
        }
        if !problems.isEmpty { check.mismatch = problems.joined(separator: "\n") }
        return check
    }

    static func device(_ value: Any?) -> Int? {
        guard let id = value as? String, id.hasPrefix("d") else { return nil }
        return Int(id.dropFirst())
    }

    /// The model's second of an alert's start.
    static func second(_ value: Any?) -> Int? {
        guard let text = value as? String, let t = Timestamp(rfc3339: text) else { return nil }
        return Int((t.microseconds - testStart.microseconds) / 1_000_000)
    }

    static func app(in text: String) -> Int? {
        AlertHistory.apps.indices.first {
            text.contains(AlertHistory.apps[$0] + " ") || text.contains(AlertHistory.apps[$0] + ")") || text.hasSuffix(AlertHistory.apps[$0])
        }
    }

    static func code(in text: String) -> Int? {
        AlertHistory.codes.first { text.contains("CKErrorDomain \($0) ") }
    }
}
