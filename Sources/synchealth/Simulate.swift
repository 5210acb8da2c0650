import ArgumentParser
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `synchealth simulate`: plays a fleet of devices against a running server.
struct Simulate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Play a fleet of devices against a running SyncHealth server (load and demo).",
        discussion: """
            Each device launches (account, network, setup, import, export), then syncs in steady state. A share \
            of the devices goes offline for a while, and a share breaks in one of the ways the monitor knows: a \
            developer error (schema not deployed), a full iCloud quota, a transient network failure, a deleted \
            zone, import never starting (notSyncing), an import that never ends (stalled), or local changes that \
            are never exported (export at risk). Pointed at a running server, it fills the dashboards and fires \
            real alerts (the alert delays are the server's).
            """
    )

    @Option(help: "The server's base URL.")
    var url = "http://127.0.0.1:8080"

    @Option(help: "An ingest key. [SYNCHEALTH_INGEST_KEY]")
    var key: String?

    @Option(help: "Number of devices.")
    var devices = 1000

    @Option(help: "How long to play, in seconds.")
    var duration: Double = 30

    @Option(help: "Stop after this many rounds (the launch is round 0), even before the duration is over.")
    var rounds: Int?

    @Option(help: "Share of devices that break (0-1).")
    var brokenShare = 0.1

    @Option(help: "Share of devices that go offline for a while (0-1).")
    var offlineShare = 0.05

    @Option(help: "Requests in flight at once.")
    var concurrency = 32

    @Option(help: "App id of the simulated devices.")
    var appId = "com.example.simulated"

    func run() async throws {
        guard let key = key ?? ProcessInfo.processInfo.environment["SYNCHEALTH_INGEST_KEY"], !key.isEmpty else {
            throw ValidationError("an ingest key is needed: --key or SYNCHEALTH_INGEST_KEY")
        }
        guard let endpoint = URL(string: url + "/v1/events") else { throw ValidationError("--url is not a URL") }
        if let rounds, rounds < 1 { throw ValidationError("--rounds must be at least 1") }
        let fleet = (0..<devices).map { SimulatedDevice(index: $0, brokenShare: brokenShare, offlineShare: offlineShare, appId: appId) }
        let stats = SimulationStats()
        let end = Date().addingTimeInterval(duration)
        let roundLimit = rounds ?? Int.max
        await withTaskGroup(of: Void.self) { group in
            // Progress, once a second, until the workers are done.
            group.addTask {
                while Date().addingTimeInterval(1) < end {
                    do { try await Task.sleep(for: .seconds(1)) } catch { return }
                    await stats.printLine()
                }
            }
            await withTaskGroup(of: Void.self) { workers in
                for worker in 0..<max(1, concurrency) {
                    workers.addTask {
                        var round = 0
                        while Date() < end, round < roundLimit {
                            var any = false
                            for index in stride(from: worker, to: fleet.count, by: max(1, concurrency)) {
                                guard Date() < end else { break }
                                guard let body = fleet[index].batch(round: round) else { continue }
                                any = true
                                await stats.record(await Self.post(body, to: endpoint, key: key))
                            }
                            round += 1
                            if !any { try? await Task.sleep(for: .milliseconds(200)) }
                        }
                    }
                }
            }
            group.cancelAll()
        }
        await stats.printLine(final: true)
    }

    static func post(_ body: Data, to url: URL, key: String) async -> Int {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization")
        guard let (_, response) = try? await URLSession.shared.data(for: request) else { return 0 }
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }
}

/// Counts answers and prints progress.
actor SimulationStats {
    var sent = 0
    var byStatus: [Int: Int] = [:]
    let started = Date()

    func record(_ status: Int) {
        sent += 1
        byStatus[status, default: 0] += 1
    }

    func printLine(final: Bool = false) {
        let elapsed = Date().timeIntervalSince(started)
        let statuses = byStatus.sorted { $0.key < $1.key }.map { "\($0.key == 0 ? "failed" : String($0.key)): \($0.value)" }.joined(separator: ", ")
        print("\(final ? "done" : "simulating"): \(sent) batches in \(Int(elapsed)) s (\(Int(Double(sent) / max(elapsed, 0.001))) /s) [\(statuses)]")
    }
}

/// One device's script: what it posts in each round.
struct SimulatedDevice: Sendable {
    enum Fate: CaseIterable {
        case healthy, offline, developerError, quotaFull, transientFailure, zoneDeleted, notSyncing, stalled, exportAtRisk
    }

    let deviceId: String
    let appId: String
    let fate: Fate

    init(index: Int, brokenShare: Double, offlineShare: Double, appId: String) {
        deviceId = String(format: "SIM-%08d", index)
        self.appId = appId
        // Deterministic per index, so that a run is repeatable.
        var hash = UInt64(truncatingIfNeeded: index) &* 0x9E37_79B9_7F4A_7C15
        hash ^= hash >> 29
        let draw = Double(hash % 10_000) / 10_000
        let broken: [Fate] = [.developerError, .quotaFull, .transientFailure, .zoneDeleted, .notSyncing, .stalled, .exportAtRisk]
        if draw < brokenShare {
            fate = broken[Int(hash / 10_000 % UInt64(broken.count))]
        } else if draw < brokenShare + offlineShare {
            fate = .offline
        } else {
            fate = .healthy
        }
    }

    /// The batch of one round, or `nil` when the device stays quiet.
    func batch(round: Int) -> Data? {
        let now = Date()
        func at(_ offset: Double) -> String { ISO8601DateFormatter.string(from: now.addingTimeInterval(offset), timeZone: .gmt, formatOptions: [.withInternetDateTime, .withFractionalSeconds]) }
        let prefix = "r\(round)-"
        var events: [String] = []
        func add(_ id: String, _ offset: Double, _ fields: String) {
            events.append(#"{"eventId": "\#(prefix)\#(id)", "occurredAt": "\#(at(offset))", \#(fields)}"#)
        }
        func activity(_ phase: String, _ state: String, error: (String, Int)? = nil) -> String {
            var text = #""kind": "activity", "phase": "\#(phase)", "state": "\#(state)""#
            if let error { text += #", "error": {"domain": "\#(error.0)", "code": \#(error.1)}"# }
            return text
        }
        if round == 0 {
            add("acct", -3, #""kind": "account", "status": "available""#)
            add("net", -3, #""kind": "network", "available": true"#)
            add("setup-s", -2.9, activity("setup", "started"))
            add("setup-e", -2.5, activity("setup", "succeeded"))
            if fate == .notSyncing { return body(events) }
            add("imp-s", -2.4, activity("import", "started"))
            if fate == .stalled { return body(events) }
            add("imp-e", -2, activity("import", "succeeded"))
            add("exp-s", -1.9, activity("export", "started"))
            add("exp-e", -1.5, activity("export", "succeeded"))
            return body(events)
        }
        switch fate {
        case .notSyncing, .stalled:
            return round % 10 == 0 ? body([#"{"eventId": "\#(prefix)hb", "occurredAt": "\#(at(0))", "kind": "heartbeat"}"#]) : nil
        case .offline:
            // Offline for rounds 5-20, then back.
            if round == 5 { add("off", 0, #""kind": "network", "available": false"#); return body(events) }
            if round == 20 { add("on", 0, #""kind": "network", "available": true"#); return body(events) }
            if (5..<20).contains(round) { return nil }
        case .exportAtRisk:
            add("pend", 0, #""kind": "pending", "pendingChanges": \#(round), "oldestPendingAt": "\#(at(-Double(round) * 10))""#)
            add("exp-s", 0.1, activity("export", "started"))
            add("exp-f", 0.5, activity("export", "failed"))
            return body(events)
        case .developerError, .quotaFull, .transientFailure, .zoneDeleted:
            let code = [Fate.developerError: 5, .quotaFull: 25, .transientFailure: 4, .zoneDeleted: 26][fate] ?? 4
            add("exp-s", 0, activity("export", "started"))
            add("exp-f", 0.4, activity("export", "failed", error: ("CKErrorDomain", code)))
            return body(events)
        case .healthy:
            break
        }
        add("imp-s", 0, activity("import", "started"))
        add("imp-e", 0.3, activity("import", "succeeded"))
        add("exp-s", 0.4, activity("export", "started"))
        add("exp-e", 0.7, activity("export", "succeeded"))
        return body(events)
    }

    func body(_ events: [String]) -> Data {
        Data(#"{"device": {"deviceId": "\#(deviceId)", "appId": "\#(appId)", "containerId": "iCloud.\#(appId)", "platform": "iOS"}, "events": [\#(events.joined(separator: ","))]}"#.utf8)
    }
}
