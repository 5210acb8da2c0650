import Foundation
import SyncHealthCore
import SyncHealthTestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One simulated device: its events, split into batches, each posted until acknowledged.
struct CrashDevice {
    let id: String
    var batches: [[DeviceEvent]]
    var acceptedTotal = 0
    var nextBatch = 0
    /// Whether the current batch was posted before without an answer (the server died).
    var retrying = false
    /// Problems seen in answers: a batch that was partly applied, or duplicates on a first attempt.
    var violations: [String] = []

    var allEvents: [DeviceEvent] { batches.flatMap { $0 } }
}

/// The JSON of one event.
func eventJSON(_ e: DeviceEvent) -> String {
    var fields = #""eventId": "\#(e.eventId)", "occurredAt": "\#(e.occurredAt.rfc3339)""#
    switch e.body {
    case .activity(let a):
        fields += #", "kind": "activity", "phase": "\#(a.phase.rawValue)", "state": "\#(a.state.rawValue)""#
        if let s = a.startedAt { fields += #", "startedAt": "\#(s.rfc3339)""# }
        if let err = a.error { fields += #", "error": {"domain": "\#(err.domain)", "code": \#(err.code)}"# }
    case .network(let up): fields += #", "kind": "network", "available": \#(up)"#
    case .account(let s): fields += #", "kind": "account", "status": "\#(s.rawValue)""#
    case .pending(let n, _): fields += #", "kind": "pending", "pendingChanges": \#(n)"#
    case .heartbeat: fields += #", "kind": "heartbeat""#
    }
    return "{\(fields)}"
}

/// Random events with distinct times, posted out of order within and across batches.
func randomDevice(_ index: Int, rng: inout some RandomNumberGenerator) -> CrashDevice {
    let base = Timestamp(rfc3339: "2026-11-22T10:00:00Z") ?? Timestamp(microseconds: 0)
    var events: [DeviceEvent] = []
    for n in 0..<Int.random(in: 40...80, using: &rng) {
        let at = base + .milliseconds(Int64(n * 10 + Int.random(in: 0...5, using: &rng)))
        let body: DeviceEvent.Body
        switch Int.random(in: 0..<6, using: &rng) {
        case 0, 1, 2:
            let state = ActivityState.allCases.randomElement(using: &rng) ?? .started
            let error =
                state == .failed && Bool.random(using: &rng)
                ? SyncErrorReport(domain: "CKErrorDomain", code: [3, 5, 14, 25, 26].randomElement(using: &rng) ?? 3) : nil
            body = .activity(
                .init(
                    phase: Phase.allCases.randomElement(using: &rng) ?? .import,
                    state: state,
                    startedAt: state == .started ? nil : at - .milliseconds(3),
                    error: error
                )
            )
        case 3: body = .network(available: Int.random(in: 0..<4, using: &rng) > 0)
        case 4: body = .account(Int.random(in: 0..<4, using: &rng) > 0 ? .available : .noAccount)
        default: body = .pending(count: Int.random(in: 0...3, using: &rng), oldestPendingAt: nil)
        }
        events.append(DeviceEvent(eventId: "ev-\(index)-\(n)", occurredAt: at, body: body))
    }
    events.shuffle(using: &rng)
    var batches: [[DeviceEvent]] = []
    var rest = events[...]
    while !rest.isEmpty {
        let n = min(rest.count, Int.random(in: 1...8, using: &rng))
        batches.append(Array(rest.prefix(n)))
        rest = rest.dropFirst(n)
    }
    return CrashDevice(id: "crash-\(index)", batches: batches)
}

@Suite("Crash: SIGKILL at random moments loses no acknowledged event and applies none twice", .serialized)
struct CrashTests {
    @Test("clients post in a loop while the server is killed and restarted three times")
    func killAndRestart() async throws {
        var rng = SplitMix64(seed: UInt64(ProcessInfo.processInfo.environment["CRASH_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64.max))
        let seed = rng.state
        let dataDirectory = temporaryDirectory()
        let keys = [
            "SYNCHEALTH_INGEST_KEYS": "crash-ingest-0123456789abcdefghijklmnop", "SYNCHEALTH_READ_KEYS": "crash-read-0123456789abcdefghijklmnop",
        ]
        let devices = (0..<12).map { randomDevice($0, rng: &rng) }
        let state = CrashState(devices: devices)

        for round in 0..<4 {
            let server = try LiveServer(dataDirectory: dataDirectory, environment: keys)
            let killAfter = round == 3 ? nil : Duration.milliseconds(Int.random(in: 150...700, using: &rng))
            await withTaskGroup(of: Void.self) { group in
                for index in devices.indices {
                    group.addTask { await state.drive(index, server: server) }
                }
                if let killAfter {
                    group.addTask {
                        try? await Task.sleep(for: killAfter)
                        kill(server.process.processIdentifier, SIGKILL)
                    }
                }
                await group.waitForAll()
            }
            if killAfter == nil {
                // Last round: every batch is acknowledged. Compare with the reference fold, once the restarted
                // server has loaded its state (the devices may have finished in an earlier round, so this round
                // posted nothing that would have waited for it).
                try await server.waitUntilReady()
                for device in await state.devices {
                    try await expectMatchesReference(device, on: server, path: "/v1/devices/\(device.id)", seed: seed)
                }
                #expect(server.stop() == 0)
            } else {
                server.process.waitUntilExit()
            }
        }
    }
}

/// Checks a device that finished its batches: never more accepted than sent (a batch whose `202` was lost comes
/// back as duplicates), and the state the server shows equals the reference fold of all its events.
func expectMatchesReference(_ device: CrashDevice, on server: LiveServer, path: String, seed: UInt64) async throws {
    #expect(device.nextBatch == device.batches.count, "seed \(seed): \(device.id) not finished")
    #expect(
        device.acceptedTotal <= device.allEvents.count,
        "seed \(seed): \(device.id) accepted \(device.acceptedTotal) of \(device.allEvents.count): applied twice"
    )
    #expect(device.violations.isEmpty, "seed \(seed): \(device.id): \(device.violations)")
    var reference = MonitorState()
    for e in device.allEvents.sorted(by: { $0.occurredAt < $1.occurredAt }) { reference.apply(e, receivedAt: e.occurredAt) }
    let response = try await server.request("GET", path, key: "crash-read-0123456789abcdefghijklmnop")
    #expect(response.status == 200, "seed \(seed): \(device.id): \(String(decoding: response.body, as: UTF8.self))")
    let status = try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
    #expect(status["syncStateSummary"] as? String == reference.summary.rawValue, "seed \(seed): \(device.id)")
    #expect(status["pendingChanges"] as? Int == reference.pendingChanges, "seed \(seed): \(device.id)")
    #expect((status["isNetworkAvailable"] as? Bool) == reference.network, "seed \(seed): \(device.id)")
    #expect((status["accountStatus"] as? String) == reference.account?.rawValue, "seed \(seed): \(device.id)")
    #expect(((status["lastSyncError"] as? [String: Any])?["code"] as? Int) == reference.lastSyncError?.code, "seed \(seed): \(device.id)")
    for (name, phase) in [("setupState", Phase.setup), ("importState", .import), ("exportState", .export)] {
        let slot = status[name] as? [String: Any]
        #expect(slot?["status"] as? String == reference[phase].state.status.rawValue, "seed \(seed): \(device.id) \(name)")
        #expect(slot?["startedAt"] as? String == reference[phase].state.startedAt?.rfc3339, "seed \(seed): \(device.id) \(name)")
    }
}

/// The clients' shared record of what was acknowledged.
actor CrashState {
    var devices: [CrashDevice]
    init(devices: [CrashDevice]) { self.devices = devices }

    func record(_ index: Int, accepted: Int, duplicates: Int) {
        let d = devices[index]
        let size = d.batches[d.nextBatch].count
        // A commit is all or nothing: a batch is either wholly new or wholly duplicates.
        if accepted + duplicates != size || (accepted != 0 && duplicates != 0) {
            devices[index].violations.append("batch \(d.nextBatch): \(accepted) accepted + \(duplicates) duplicates of \(size)")
        }
        if !d.retrying && duplicates != 0 {
            devices[index].violations.append("batch \(d.nextBatch): duplicates on its first attempt")
        }
        devices[index].acceptedTotal += accepted
        devices[index].nextBatch += 1
        devices[index].retrying = false
    }

    func markRetrying(_ index: Int) { devices[index].retrying = true }

    /// Posts the device's batches in order, each until acknowledged; returns when done or the server is gone.
    nonisolated func drive(_ index: Int, server: LiveServer) async {
        while true {
            guard let batch = await nextBatch(index) else { return }
            let body =
                #"{"device": {"deviceId": "\#(batch.id)", "appId": "com.crash"}, "events": [\#(batch.events.map(eventJSON).joined(separator: ","))]}"#
            do {
                let response = try await server.request("POST", "/v1/events", key: "crash-ingest-0123456789abcdefghijklmnop", body: Data(body.utf8))
                guard response.status == 202,
                    let json = try JSONSerialization.jsonObject(with: response.body) as? [String: Any],
                    let accepted = json["accepted"] as? Int, let duplicates = json["duplicates"] as? Int
                else {
                    await markRetrying(index)
                    return
                }
                await record(index, accepted: accepted, duplicates: duplicates)
            } catch {
                // The server died: this batch is unacknowledged and is posted again after the restart.
                await markRetrying(index)
                return
            }
        }
    }

    func nextBatch(_ index: Int) -> (id: String, events: [DeviceEvent])? {
        let d = devices[index]
        return d.nextBatch < d.batches.count ? (d.id, d.batches[d.nextBatch]) : nil
    }
}
