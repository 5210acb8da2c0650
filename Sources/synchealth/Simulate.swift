import ArgumentParser
import Foundation
import SyncHealthClient

/// `synchealth simulate`: plays a fleet of devices against a running server, through the client package.
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

            Every device is a SyncHealthReporter of the client package, with its queue on disk under --storage: \
            events the server did not acknowledge stay there, and --drain sends them later.
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

    @Option(help: "Comma-separated app versions the devices run, oldest first; each device runs one.")
    var appVersions = "1.0,1.1,1.2"

    @Option(help: "An app version whose rollout breaks sync: most of its devices fail with CKError.serverRejectedRequest.")
    var badRelease: String?

    @Option(help: "Share of --bad-release's devices that break (0-1).")
    var badReleaseShare = 0.6

    @Option(help: "Devices sending at once.")
    var concurrency = 32

    @Option(help: "App id of the simulated devices.")
    var appId = "com.example.simulated"

    @Option(help: "Events per request at most (the client's batch size).")
    var batchSize = 100

    @Option(help: "Where the devices keep their queues; a temporary directory (removed at the end) if not given.")
    var storage: String?

    @Flag(help: "Record nothing: only send what the queues under --storage hold, until they are empty or the duration is over.")
    var drain = false

    func run() async throws {
        guard let key = key ?? ProcessInfo.processInfo.environment["SYNCHEALTH_INGEST_KEY"], !key.isEmpty else {
            throw ValidationError("an ingest key is needed: --key or SYNCHEALTH_INGEST_KEY")
        }
        guard let endpoint = URL(string: url), endpoint.scheme != nil else { throw ValidationError("--url is not a URL") }
        if let rounds, rounds < 1 { throw ValidationError("--rounds must be at least 1") }
        if drain && storage == nil { throw ValidationError("--drain needs --storage") }
        var versions = appVersions.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        if let badRelease, !versions.contains(badRelease) { versions.append(badRelease) }
        guard !versions.isEmpty else { throw ValidationError("--app-versions names no version") }
        let release = SimulatedDevice.Release(versions: versions, bad: badRelease, badShare: badReleaseShare)
        let root = URL(
            fileURLWithPath: storage ?? FileManager.default.temporaryDirectory.appendingPathComponent("synchealth-simulate-\(UUID().uuidString)").path
        )
        defer { if storage == nil { try? FileManager.default.removeItem(at: root) } }

        let transport = URLSessionTransport()
        let fleet = try (0..<devices).map { index in
            let script = SimulatedDevice(index: index, brokenShare: brokenShare, offlineShare: offlineShare, release: release)
            var configuration = SyncHealthReporter.Configuration(
                endpoint: endpoint,
                ingestKey: key,
                appId: appId,
                containerId: "iCloud.\(appId)",
                deviceId: script.deviceId,
                storageDirectory: root.appendingPathComponent(script.deviceId)
            )
            configuration.batchSize = batchSize
            configuration.appVersion = script.appVersion
            configuration.transport = transport
            configuration.heartbeatOnStart = false
            configuration.observesNetworkAndAccount = false
            configuration.sendInterval = .seconds(24 * 3600)  // this command flushes itself
            configuration.log = { _ in }
            return (script, try SyncHealthReporter(configuration: configuration))
        }
        let stats = SimulationStats()
        let end = Date().addingTimeInterval(duration)
        let roundLimit = drain ? 1 : rounds ?? Int.max
        let drain = drain
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
                                let (script, reporter) = fleet[index]
                                if !drain {
                                    let events = script.events(round: round)
                                    guard !events.isEmpty else { continue }
                                    let now = Date()
                                    for (offset, event) in events { reporter.record(event, at: now.addingTimeInterval(offset)) }
                                }
                                any = true
                                await stats.record(await Self.send(reporter, until: drain ? end : nil))
                            }
                            round += 1
                            if !any { try? await Task.sleep(for: .milliseconds(200)) }
                        }
                    }
                }
            }
            group.cancelAll()
        }
        var queued = 0
        for (_, reporter) in fleet {
            await reporter.shutdown()
            queued += reporter.delivery.queuedEvents
        }
        await stats.printLine(final: true)
        print("queued: \(queued) events not yet delivered")
    }

    /// Flushes a device's queue: once, or (draining) until it is empty, waiting as the server asks.
    static func send(_ reporter: SyncHealthReporter, until end: Date?) async -> String {
        while true {
            do {
                try await reporter.flush()
                return "202"
            } catch SyncHealthReporterError.rateLimited(let after) {
                guard let end, Date().addingTimeInterval(after.secondsValue) < end else { return "429" }
                try? await Task.sleep(for: after)
            } catch SyncHealthReporterError.refused(let status, _) {
                return String(status)
            } catch {
                guard let end, Date().addingTimeInterval(1) < end else { return "failed" }
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }
}

/// Counts outcomes and prints progress.
actor SimulationStats {
    var sent = 0
    var byOutcome: [String: Int] = [:]
    let started = Date()

    func record(_ outcome: String) {
        sent += 1
        byOutcome[outcome, default: 0] += 1
    }

    func printLine(final: Bool = false) {
        let elapsed = Date().timeIntervalSince(started)
        let outcomes = byOutcome.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
        print("\(final ? "done" : "simulating"): \(sent) flushes in \(Int(elapsed)) s (\(Int(Double(sent) / max(elapsed, 0.001))) /s) [\(outcomes)]")
    }
}

/// One device's script: what it records in each round.
struct SimulatedDevice: Sendable {
    enum Fate: CaseIterable {
        case healthy, offline, developerError, quotaFull, transientFailure, zoneDeleted, notSyncing, stalled, exportAtRisk, badRelease
    }

    /// The app versions a fleet runs, and the one whose rollout breaks.
    struct Release: Sendable {
        var versions: [String]
        var bad: String?
        var badShare: Double
    }

    let deviceId: String
    let appVersion: String
    let fate: Fate

    init(index: Int, brokenShare: Double, offlineShare: Double, release: Release = Release(versions: ["1.0"], bad: nil, badShare: 0)) {
        deviceId = String(format: "SIM-%08d", index)
        // Deterministic per index, so that a run is repeatable.
        var hash = UInt64(truncatingIfNeeded: index) &* 0x9E37_79B9_7F4A_7C15
        hash ^= hash >> 29
        let draw = Double(hash % 10_000) / 10_000
        appVersion = release.versions[Int((hash >> 40) % UInt64(max(1, release.versions.count)))]
        let broken: [Fate] = [.developerError, .quotaFull, .transientFailure, .zoneDeleted, .notSyncing, .stalled, .exportAtRisk]
        if appVersion == release.bad, Double((hash >> 20) % 10_000) / 10_000 < release.badShare {
            fate = .badRelease
        } else if draw < brokenShare {
            fate = broken[Int(hash / 10_000 % UInt64(broken.count))]
        } else if draw < brokenShare + offlineShare {
            fate = .offline
        } else {
            fate = .healthy
        }
    }

    /// The events of one round, each with its offset in seconds from now; empty when the device stays quiet.
    func events(round: Int) -> [(Double, SyncEvent)] {
        func activity(_ phase: Phase, _ state: ActivityState, code: Int? = nil) -> SyncEvent {
            .activity(phase: phase, state: state, error: code.map { SyncErrorReport(domain: SyncErrorReport.cloudKitDomain, code: $0) })
        }
        if round == 0 {
            var events: [(Double, SyncEvent)] = [
                (-3, .account(status: .available)), (-3, .network(available: true)),
                (-2.9, activity(.setup, .started)), (-2.5, activity(.setup, .succeeded)),
            ]
            if fate == .notSyncing { return events }
            events.append((-2.4, activity(.import, .started)))
            if fate == .stalled { return events }
            events += [(-2, activity(.import, .succeeded)), (-1.9, activity(.export, .started)), (-1.5, activity(.export, .succeeded))]
            return events
        }
        switch fate {
        case .notSyncing, .stalled:
            return round % 10 == 0 ? [(0, .heartbeat)] : []
        case .offline:
            // Offline for rounds 5-20, then back.
            if round == 5 { return [(0, .network(available: false))] }
            if round == 20 { return [(0, .network(available: true))] }
            if (5..<20).contains(round) { return [] }
        case .exportAtRisk:
            return [
                (0, .pending(count: round, oldestPendingAt: Date().addingTimeInterval(-Double(round) * 10))),
                (0.1, activity(.export, .started)), (0.5, activity(.export, .failed)),
            ]
        case .developerError, .quotaFull, .transientFailure, .zoneDeleted, .badRelease:
            // A bad release's typical failure: a record type missing from the production schema.
            let code = [Fate.developerError: 5, .quotaFull: 25, .transientFailure: 4, .zoneDeleted: 26, .badRelease: 15][fate] ?? 4
            return [(0, activity(.export, .started)), (0.4, activity(.export, .failed, code: code))]
        case .healthy:
            break
        }
        return [
            (0, activity(.import, .started)), (0.3, activity(.import, .succeeded)), (0.4, activity(.export, .started)),
            (0.7, activity(.export, .succeeded)),
        ]
    }
}
