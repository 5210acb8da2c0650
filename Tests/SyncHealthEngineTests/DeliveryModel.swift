import SyncHealthTestSupport

// The delivery model: what each subscription must receive for a history of alerts, silences, time and restarts.
//
// Written from docs/alerts.md ("Incidents", "Silence a known outage", "The Standard Webhooks envelope"), not from
// the engine's code, so that the property test compares the engine with what ops are promised:
// - a device alert's fire is told to a subscription that groups by device when it fires, unless a matching silence
//   is in force; then when no matching silence is in force any more, if it still fires. Its resolve is told exactly
//   when its fire was: those told of a fire hear that it ended, those never told of it hear nothing;
// - an incident (one per app, container, kind and error) is told opened once it has been open for the group wait,
//   unless a silence that matches its app, container or kind holds it; then at the first grouping after the silence
//   ends, if it is still open. It is told resolved when its last device recovers, if it was told opened;
// - nothing is told twice, whatever restarts and replicas do, and one line's messages keep their order;
// - Alertmanager holds, in the end, exactly the alerts that fire and no silence holds.
//
// Time moves in whole minutes: grouping happens when time moves, before the steps of the new minute, and the group
// wait (30 s) has passed for every device that broke in an earlier minute. Histories in which a device or an incident
// would flap (a fourth fire or opening within an hour) are left out: flapping has tests of its own, and the model
// would have to repeat its thresholds.

/// A history the model and the engine both play.
struct AlertHistory: Sendable, CustomStringConvertible {
    /// What a silence matches.
    enum Matcher: Sendable, Hashable {
        case app(Int)
        case device(Int)
        case kind
    }

    /// How a subscription hears.
    enum Format: String, Sendable, CaseIterable {
        /// Standard Webhooks, one message per device alert.
        case standard
        /// Standard Webhooks with `"grouping": "incident"`.
        case standardIncident
        case slack
        case pagerduty
        case alertmanager

        var groupsByIncident: Bool { self == .standardIncident || self == .slack || self == .pagerduty }
    }

    struct Subscription: Sendable, Hashable {
        var format: Format
        /// Only this app's alerts (`appIds`), or every app's.
        var app: Int?
        /// `kinds`: none given, `syncError`, or a kind these histories never raise.
        var kinds: [String] = []

        func wants(app: Int) -> Bool {
            (self.app == nil || self.app == app) && (kinds.isEmpty || kinds.contains("syncError"))
        }
    }

    enum Step: Sendable, Hashable {
        /// The device's export fails with error `code` (an error that alerts at once).
        case fail(device: Int, code: Int)
        /// Its next export succeeds.
        case recover(device: Int)
        /// A silence made now, for `minutes`.
        case silence(Matcher, minutes: Int)
        /// `DELETE` of the `n`th silence made.
        case endSilence(Int)
        /// Time passes.
        case advance(minutes: Int)
        /// The service restarts (SQLite), or its replica stops and the other one goes on (PostgreSQL).
        case restart
    }

    static let apps = ["com.example.a0", "com.example.a1"]
    static let codes = [5, 15]
    static let deviceCount = 6
    static func app(of device: Int) -> Int { device % apps.count }
    static func deviceId(_ device: Int) -> String { "d\(device)" }

    var subscriptions: [Subscription]
    var steps: [Step]

    var description: String {
        "subscriptions: \(subscriptions.map { "\($0.format.rawValue)\($0.app.map { " app \($0)" } ?? "")\($0.kinds.isEmpty ? "" : " \($0.kinds)")" })\n"
            + steps.enumerated().map { "  \($0.offset): \($0.element)" }.joined(separator: "\n")
    }
}

/// One message as the model tells it, and as a delivery is read back.
enum ModelMessage: Hashable, Sendable, CustomStringConvertible {
    /// A device alert (`device`, started at `second`) fires or resolves.
    case fire(device: Int, second: Int)
    case resolve(device: Int, second: Int)
    /// An incident of `app` and `code` is told opened or resolved.
    case opened(app: Int, code: Int)
    case resolved(app: Int, code: Int)

    var description: String {
        switch self {
        case .fire(let d, let s): "fire d\(d)@\(s)"
        case .resolve(let d, let s): "resolve d\(d)@\(s)"
        case .opened(let a, let c): "opened a\(a)/\(c)"
        case .resolved(let a, let c): "resolved a\(a)/\(c)"
        }
    }
}

/// What the model expects of a history.
struct ModelOutcome: Sendable {
    /// Per subscription, its messages in order (updates of incidents left out).
    var messages: [[ModelMessage]]
    /// Per Alertmanager subscription (by index), the devices it holds firing in the end.
    var alertmanagerFiring: [Int: Set<Int>]
    /// The history's length in seconds, with the final ten minutes.
    var seconds: Int
}

/// The oracle: plays a history on plain values.
enum DeliveryModel {
    /// The final wait the player adds too: grouping and releases run once more, and Alertmanager's unrefreshed
    /// alerts lapse.
    static let finalMinutes = 10

    /// What each subscription must receive; `nil` when the history is not one the model judges (a step that makes no
    /// sense where it stands, or flapping).
    static func outcome(of history: AlertHistory) -> ModelOutcome? {
        var model = State(history: history)
        for step in history.steps {
            guard model.apply(step) else { return nil }
        }
        guard model.apply(.advance(minutes: finalMinutes)) else { return nil }
        var firing: [Int: Set<Int>] = [:]
        for (index, subscription) in history.subscriptions.enumerated() where subscription.format == .alertmanager {
            firing[index] = Set(
                model.failing.keys.filter { device in
                    subscription.wants(app: AlertHistory.app(of: device)) && !model.holds(deviceAlertOf: device)
                }
            )
        }
        return ModelOutcome(messages: model.messages, alertmanagerFiring: firing, seconds: model.now)
    }

    struct Silence {
        var matcher: AlertHistory.Matcher
        var createdAt: Int
        var endsAt: Int

        func isActive(at t: Int) -> Bool { createdAt <= t && t < endsAt }
    }

    struct Incident {
        var openedAt: Int
        var told: Bool
    }

    struct State {
        let history: AlertHistory
        var now = 0
        /// Failing devices: their error code and when their alert started.
        var failing: [Int: (code: Int, since: Int)] = [:]
        /// When each device's alerts fired (for flapping, and one alert per device and second).
        var fires: [Int: [Int]] = [:]
        var silences: [Silence] = []
        /// Per subscription, the fires held (by device) of alerts still firing, and those told.
        var held: [Set<Int>]
        var told: [Set<Int>]
        var incidents: [IncidentKey: Incident] = [:]
        /// When each incident key's told incidents opened (for flapping).
        var toldOpenings: [IncidentKey: [Int]] = [:]
        var messages: [[ModelMessage]]

        struct IncidentKey: Hashable, Comparable {
            var app: Int
            var code: Int
            static func < (a: Self, b: Self) -> Bool { (a.app, a.code) < (b.app, b.code) }
        }

        init(history: AlertHistory) {
            self.history = history
            held = Array(repeating: [], count: history.subscriptions.count)
            told = Array(repeating: [], count: history.subscriptions.count)
            messages = Array(repeating: [], count: history.subscriptions.count)
        }

        func matches(_ matcher: AlertHistory.Matcher, device: Int) -> Bool {
            switch matcher {
            case .app(let app): AlertHistory.app(of: device) == app
            case .device(let d): d == device
            case .kind: true
            }
        }

        /// Whether a silence in force holds the device's alert now.
        func holds(deviceAlertOf device: Int) -> Bool {
            silences.contains { $0.isActive(at: now) && matches($0.matcher, device: device) }
        }

        /// Whether a silence in force holds an incident of `app` now: one on its app or kind (a device's does not).
        func holds(incidentOf app: Int) -> Bool {
            silences.contains { silence in
                guard silence.isActive(at: now) else { return false }
                switch silence.matcher {
                case .app(let a): return a == app
                case .kind: return true
                case .device: return false
                }
            }
        }

        var deviceSubscribers: [Int] {
            history.subscriptions.indices.filter { !history.subscriptions[$0].format.groupsByIncident }
        }

        var incidentSubscribers: [Int] {
            history.subscriptions.indices.filter { history.subscriptions[$0].format.groupsByIncident }
        }

        /// Alertmanager's subscriptions are judged by what they hold in the end, not by their messages.
        func records(_ subscription: Int) -> Bool { history.subscriptions[subscription].format != .alertmanager }

        mutating func apply(_ step: AlertHistory.Step) -> Bool {
            switch step {
            case .fail(let device, let code):
                guard failing[device] == nil, fires[device]?.last != now else { return false }
                // A fire exactly an hour before counts: the engine's times run microseconds apart within a second.
                let recent = (fires[device] ?? []).filter { $0 >= now - 3600 }
                guard recent.count < 3 else { return false }
                fires[device, default: []].append(now)
                failing[device] = (code, now)
                let app = AlertHistory.app(of: device)
                for s in deviceSubscribers where history.subscriptions[s].wants(app: app) {
                    if holds(deviceAlertOf: device) {
                        held[s].insert(device)
                    } else {
                        told[s].insert(device)
                        if records(s) { messages[s].append(.fire(device: device, second: now)) }
                    }
                }
            case .recover(let device):
                guard let alert = failing.removeValue(forKey: device) else { return false }
                for s in deviceSubscribers {
                    if told[s].remove(device) != nil, records(s) { messages[s].append(.resolve(device: device, second: alert.since)) }
                    held[s].remove(device)
                }
            case .silence(let matcher, let minutes):
                silences.append(Silence(matcher: matcher, createdAt: now, endsAt: now + minutes * 60))
            case .endSilence(let n):
                guard n < silences.count, silences[n].endsAt > now else { return false }
                silences[n].endsAt = now
                release()
            case .advance(let minutes):
                now += minutes * 60
                guard group() else { return false }
                release()
            case .restart:
                break
            }
            return true
        }

        /// Held fires of alerts that still fire, told once no silence holds them.
        mutating func release() {
            for s in deviceSubscribers {
                for device in held[s].sorted() where !holds(deviceAlertOf: device) {
                    held[s].remove(device)
                    told[s].insert(device)
                    if records(s), let alert = failing[device] { messages[s].append(.fire(device: device, second: alert.since)) }
                }
            }
        }

        /// One grouping: incidents open, are told, and resolve.
        mutating func group() -> Bool {
            var firing: [IncidentKey: Int] = [:]
            for (device, alert) in failing {
                let key = IncidentKey(app: AlertHistory.app(of: device), code: alert.code)
                firing[key] = min(firing[key] ?? alert.since, alert.since)
            }
            for key in Set(firing.keys).union(incidents.keys).sorted() {
                if let since = firing[key] {
                    var incident = incidents[key] ?? Incident(openedAt: since, told: false)
                    if !incident.told, !holds(incidentOf: key.app) {
                        let recent = (toldOpenings[key] ?? []).filter { $0 >= now - 3600 }
                        guard recent.count < 3 else { return false }
                        toldOpenings[key, default: []].append(incident.openedAt)
                        incident.told = true
                        tell(.opened(app: key.app, code: key.code), app: key.app)
                    }
                    incidents[key] = incident
                } else if let incident = incidents.removeValue(forKey: key), incident.told {
                    tell(.resolved(app: key.app, code: key.code), app: key.app)
                }
            }
            return true
        }

        mutating func tell(_ message: ModelMessage, app: Int) {
            for s in incidentSubscribers where history.subscriptions[s].wants(app: app) { messages[s].append(message) }
        }
    }
}

extension AlertHistory {
    /// A random history: a few subscriptions (always one by device and one PagerDuty), then `steps` steps.
    static func random(steps: Int, restarts: Bool, using rng: inout SplitMix64) -> AlertHistory {
        var subscriptions = [Subscription(format: .standard), Subscription(format: .pagerduty)]
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            let format = Format.allCases.randomElement(using: &rng) ?? .standard
            let app: Int? = Bool.random(using: &rng) ? nil : Int.random(in: 0..<apps.count, using: &rng)
            let roll = Int.random(in: 0..<20, using: &rng)
            let kinds = roll == 0 ? ["notSyncing"] : roll < 3 ? ["syncError"] : []
            subscriptions.append(Subscription(format: format, app: app, kinds: kinds))
        }
        var history = AlertHistory(subscriptions: subscriptions, steps: [])
        // Steps are drawn where they make sense, by a model kept alongside.
        var state = DeliveryModel.State(history: history)
        while history.steps.count < steps {
            let roll = Int.random(in: 0..<100, using: &rng)
            var step: Step?
            switch roll {
            case 0..<30:
                let candidates = (0..<deviceCount).filter { state.failing[$0] == nil && state.fires[$0]?.last != state.now }
                step = candidates.randomElement(using: &rng).map { .fail(device: $0, code: codes.randomElement(using: &rng) ?? 5) }
            case 30..<52:
                step = state.failing.keys.sorted().randomElement(using: &rng).map { .recover(device: $0) }
            case 52..<72:
                step = .advance(minutes: [1, 1, 1, 2, 3, 5, 10, 20].randomElement(using: &rng) ?? 1)
            case 72..<84:
                let matcher: Matcher =
                    switch Int.random(in: 0..<20, using: &rng) {
                    case 0..<9: .app(Int.random(in: 0..<apps.count, using: &rng))
                    case 9..<17: .device(Int.random(in: 0..<deviceCount, using: &rng))
                    default: .kind
                    }
                step = .silence(matcher, minutes: Int.random(in: 1...15, using: &rng))
            case 84..<95:
                step = state.silences.indices.filter { state.silences[$0].endsAt > state.now }.randomElement(using: &rng).map { .endSilence($0) }
            default:
                step = restarts ? .restart : nil
            }
            guard let step else { continue }
            var next = state
            // A step that would flap is drawn again.
            guard next.apply(step) else { continue }
            state = next
            history.steps.append(step)
        }
        // The model's last grouping (its final wait) may find an incident told a fourth time within the hour: the
        // steps that lead there go.
        while !history.steps.isEmpty, DeliveryModel.outcome(of: history) == nil { history.steps.removeLast() }
        return history
    }

    /// Smaller histories than this one: without one step, or without one subscription (the first two stay).
    var shrunk: [AlertHistory] {
        var smaller: [AlertHistory] = []
        for i in steps.indices.reversed() {
            var h = self
            h.steps.remove(at: i)
            smaller.append(h)
        }
        for i in subscriptions.indices.dropFirst(2).reversed() {
            var h = self
            h.subscriptions.remove(at: i)
            smaller.append(h)
        }
        return smaller
    }
}
