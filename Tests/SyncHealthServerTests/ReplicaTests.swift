import Foundation
import SyncHealthCore
import SyncHealthEngineTesting
import SyncHealthTestSupport
import Synchronization
import Testing

/// The replicas a client may post to; one of them dies during the test.
final class Replicas: Sendable {
    let alive: Mutex<[LiveServer]>
    /// When a replica was killed.
    let killedAt = Mutex<ContinuousClock.Instant?>(nil)
    init(_ servers: [LiveServer]) { alive = Mutex(servers) }

    func any() -> LiveServer? { alive.withLock { $0.randomElement() } }
    func remove(_ server: LiveServer) { alive.withLock { $0.removeAll { $0 === server } } }
}

extension CrashState {
    /// Posts the device's batches in order, each to a random live replica until one acknowledges it.
    nonisolated func drive(_ index: Int, replicas: Replicas) async {
        while let batch = await nextBatch(index) {
            let body =
                #"{"device": {"deviceId": "\#(batch.id)", "appId": "com.crash"}, "events": [\#(batch.events.map(eventJSON).joined(separator: ","))]}"#
            guard let server = replicas.any() else { return }
            if let response = try? await server.request("POST", "/v1/events", key: "crash-ingest-0123456789abcdefghijklmnop", body: Data(body.utf8)),
                response.status == 202,
                let json = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any],
                let accepted = json["accepted"] as? Int, let duplicates = json["duplicates"] as? Int
            {
                await record(index, accepted: accepted, duplicates: duplicates)
            } else {
                // No answer (the replica died) or not accepted: unacknowledged, posted again.
                await markRetrying(index)
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
    }
}

/// The same random devices as the crash test, without sync errors: the alerts of this test come from the
/// breaking devices only, so that every transition is known.
func quietDevice(_ index: Int, rng: inout some RandomNumberGenerator) -> CrashDevice {
    var device = randomDevice(index, rng: &rng)
    device.batches = device.batches.map { batch in
        batch.map { e in
            guard case .activity(let a) = e.body else { return e }
            return DeviceEvent(
                eventId: e.eventId,
                occurredAt: e.occurredAt,
                body: .activity(.init(phase: a.phase, state: a.state == .failed ? .succeeded : a.state, startedAt: a.startedAt))
            )
        }
    }
    return device
}

/// Posts one batch of raw event JSON for a device until a replica acknowledges it.
func postUntilAcknowledged(_ deviceId: String, _ events: [String], to replicas: Replicas) async throws {
    let body = #"{"device": {"deviceId": "\#(deviceId)", "appId": "com.crash"}, "events": [\#(events.joined(separator: ","))]}"#
    for _ in 0..<200 {
        if let server = replicas.any(),
            let response = try? await server.request("POST", "/v1/events", key: "crash-ingest-0123456789abcdefghijklmnop", body: Data(body.utf8)),
            response.status == 202
        {
            return
        }
        try await Task.sleep(for: .milliseconds(20))
    }
    Issue.record("\(deviceId): no replica acknowledged the batch")
}

/// Posts one batch until a replica acknowledges it; returns the number of its events the service applied for it
/// (not duplicates of earlier batches).
///
/// A replica killed after it committed a batch but before it answered applied the batch once: the retry finds its
/// events seen, and they count as accepted. A batch answered on its first try counts its accepted events alone.
func acceptedCount(_ deviceId: String, _ events: [String], to replicas: Replicas) async throws -> Int {
    let body = #"{"device": {"deviceId": "\#(deviceId)", "appId": "com.crash"}, "events": [\#(events.joined(separator: ","))]}"#
    var unanswered = false
    for _ in 0..<200 {
        if let server = replicas.any() {
            if let response = try? await server.request("POST", "/v1/events", key: "crash-ingest-0123456789abcdefghijklmnop", body: Data(body.utf8)),
                response.status == 202,
                let json = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any], let accepted = json["accepted"] as? Int
            {
                return accepted + (unanswered ? json["duplicates"] as? Int ?? 0 : 0)
            }
            unanswered = true
        }
        try await Task.sleep(for: .milliseconds(20))
    }
    Issue.record("\(deviceId): no replica acknowledged the batch")
    return 0
}

/// A device whose export fails with `CKErrorDomain` `code`: 9 (notAuthenticated, fires after the error delay) unless
/// told otherwise; 5 (badContainer, a developer error) fires at once.
func breakingEvents(_ deviceId: String, at: Timestamp, code: Int = 9) -> [String] {
    [
        #"{"eventId": "\#(deviceId)-n", "occurredAt": "\#(at.rfc3339)", "kind": "network", "available": true}"#,
        #"{"eventId": "\#(deviceId)-f", "occurredAt": "\#((at + .milliseconds(1)).rfc3339)", "kind": "activity", "phase": "export", "state": "failed", "error": {"domain": "CKErrorDomain", "code": \#(code)}}"#,
    ]
}

func recoveryEvents(_ deviceId: String, at: Timestamp) -> [String] {
    [#"{"eventId": "\#(deviceId)-s", "occurredAt": "\#(at.rfc3339)", "kind": "activity", "phase": "export", "state": "started"}"#]
}

@Suite("Replicas: two servers on one PostgreSQL database", .serialized, .enabled(if: PostgresTesting.baseURL != nil))
struct ReplicaTests {
    @Test("posts go to both at random, one is SIGKILLed mid-run: events applied once, each transition delivered once, timers taken over")
    func twoReplicasAndAKill() async throws {
        let rng = SplitMix64(seed: UInt64(ProcessInfo.processInfo.environment["CRASH_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64.max))
        let seed = rng.state
        let url = try await PostgresTesting.freshDatabase()
        let receiver = TestReceiver()
        try await withReceiver(receiver) { port in
            var rng = SplitMix64(seed: seed)
            let environment = [
                "SYNCHEALTH_DATABASE_URL": url, "SYNCHEALTH_INGEST_KEYS": "crash-ingest-0123456789abcdefghijklmnop",
                "SYNCHEALTH_READ_KEYS": "crash-read-0123456789abcdefghijklmnop",
                "SYNCHEALTH_ADMIN_KEYS": "crash-admin-0123456789abcdefghijklmnop", "SYNCHEALTH_ERROR_AFTER": "1s",
                "SYNCHEALTH_WEBHOOK_ALLOW_PRIVATE": "1",
                "SYNCHEALTH_WEBHOOK_LEASE": "20s", "SYNCHEALTH_DEVICE_RATE_LIMIT": "off",
            ]
            let a = try LiveServer(environment: environment)
            let b = try LiveServer(environment: environment)
            let replicas = Replicas([a, b])
            for server in [a, b] {
                #expect(try await eventually { try await server.request("GET", "/readyz").status == 200 }, "seed \(seed): a replica never got ready")
            }
            let hook = try await b.request(
                "POST",
                "/v1/webhooks",
                key: "crash-admin-0123456789abcdefghijklmnop",
                body: Data(#"{"url": "http://127.0.0.1:\#(port)/hook"}"#.utf8)
            )
            #expect(hook.status == 201)

            let devices = (0..<10).map { quietDevice($0, rng: &rng) }
            let state = CrashState(devices: devices)
            let firstWave = (0..<8).map { "brk-a\($0)" }
            let secondWave = (0..<8).map { "brk-b\($0)" }
            let contendedEvents = 40
            let killAfter = Duration.milliseconds(Int.random(in: 300...900, using: &rng))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in devices.indices {
                    group.addTask { await state.drive(index, replicas: replicas) }
                }
                for id in firstWave {
                    group.addTask {
                        try await postUntilAcknowledged(id, breakingEvents(id, at: Timestamp(seconds: Date().timeIntervalSince1970)), to: replicas)
                    }
                }
                // One device written through both replicas at once: 40 single-event posts, 8 in flight at a time.
                // Without a per-device lock, two replicas would read the same state and one write would be lost.
                group.addTask {
                    let base = Timestamp(seconds: Date().timeIntervalSince1970)
                    let accepted = try await withThrowingTaskGroup(of: Int.self) { posts in
                        var total = 0
                        for i in 0..<contendedEvents {
                            if i >= 8, let n = try await posts.next() { total += n }
                            let event =
                                #"{"eventId": "contended-\#(i)", "occurredAt": "\#((base + .milliseconds(i)).rfc3339)", "kind": "pending", "pendingChanges": \#(i)}"#
                            posts.addTask { try await acceptedCount("contended", [event], to: replicas) }
                        }
                        for try await n in posts { total += n }
                        return total
                    }
                    #expect(accepted == contendedEvents, "seed \(seed): every contended event accepted exactly once")
                }
                group.addTask {
                    try await Task.sleep(for: killAfter)
                    // The second wave goes to b alone, which dies right after: its timers are a's to run.
                    let onlyB = Replicas([b])
                    for id in secondWave {
                        try await postUntilAcknowledged(id, breakingEvents(id, at: Timestamp(seconds: Date().timeIntervalSince1970)), to: onlyB)
                    }
                    kill(b.process.processIdentifier, SIGKILL)
                    replicas.killedAt.withLock { $0 = .now }
                    replicas.remove(b)
                }
                try await group.waitForAll()
            }
            b.process.waitUntilExit()

            // Every breaking device fires once (a runs the timers of both waves), then recovers.
            let breaking = firstWave + secondWave
            func firing() async throws -> Set<String> {
                let page = try await a.request(
                    "GET",
                    "/v1/alerts?state=firing&kind=syncError&limit=200",
                    key: "crash-read-0123456789abcdefghijklmnop"
                )
                let data = (try JSONSerialization.jsonObject(with: page.body) as? [String: Any])?["data"] as? [[String: Any]] ?? []
                return Set(data.compactMap { $0["deviceId"] as? String })
            }
            let tookOver = try await eventually { try await firing().isSuperset(of: breaking) }
            let fired = try await firing()
            #expect(tookOver, "seed \(seed): timers not taken over: \(breaking.filter { !fired.contains($0) })")
            for id in breaking {
                try await postUntilAcknowledged(id, recoveryEvents(id, at: Timestamp(seconds: Date().timeIntervalSince1970)), to: replicas)
            }

            // The alerts as the store has them: each one is a firing and a resolved message.
            let listed = try await a.request("GET", "/v1/alerts?limit=200", key: "crash-read-0123456789abcdefghijklmnop")
            let alerts = (try JSONSerialization.jsonObject(with: listed.body) as? [String: Any])?["data"] as? [[String: Any]] ?? []
            #expect(alerts.count == breaking.count, "seed \(seed): one incident per breaking device")
            #expect(alerts.allSatisfy { $0["state"] as? String == "resolved" })
            var expected = Set<String>()
            for alert in alerts {
                let id = alert["id"] as? String ?? "?"
                expected.insert(id + " alert.firing")
                expected.insert(id + " alert.resolved")
            }
            func delivered() -> [String] { receiver.all.map { ($0.alert["id"] as? String ?? "?") + " " + ($0.type ?? "?") } }
            // A message in flight on b when it died waits for its lease (20 s) before a sends it.
            _ = try await eventually(tries: 300, every: .milliseconds(100)) { Set(delivered()) == expected }
            #expect(Set(delivered()) == expected, "seed \(seed): every transition reaches the receiver")
            // Exactly once, except a message that b sent and could not record before it died: a sends it again
            // after the lease, with the same webhook-id (receivers drop repeats by id).
            var byId: [String: [TestReceiver.Received]] = [:]
            for message in receiver.all { byId[message.id, default: []].append(message) }
            #expect(byId.count == expected.count, "seed \(seed): one webhook-id per transition")
            let killInstant = replicas.killedAt.withLock { $0 }
            // b sent the first copy before it died; the receiver stamps a message once it has read it, so allow it
            // to land a little after the kill. The second copy is a's, a lease (20 s) after b claimed it.
            for (id, copies) in byId where copies.count > 1 {
                let sentByB = killInstant.map { copies[0].at < $0 + .seconds(2) } == true
                let afterLease = copies.count == 2 && copies[1].at - copies[0].at > .seconds(10)
                #expect(copies.count == 2 && sentByB && afterLease, "seed \(seed): \(id) delivered \(copies.count) times")
            }

            // Every acknowledged event applied once: the state equals the fold of all events.
            for device in await state.devices {
                try await expectMatchesReference(device, on: a, path: "/v1/devices/\(device.id)?appId=com.crash", seed: seed)
            }
            let contended = try await a.request("GET", "/v1/devices/contended?appId=com.crash", key: "crash-read-0123456789abcdefghijklmnop")
            let contendedStatus = try JSONSerialization.jsonObject(with: contended.body) as? [String: Any]
            #expect(contendedStatus?["pendingChanges"] as? Int == contendedEvents - 1, "seed \(seed): the latest of the contended events wins")
            let summary = try await a.request("GET", "/v1/summary", key: "crash-read-0123456789abcdefghijklmnop")
            let counts = try #require(try JSONSerialization.jsonObject(with: summary.body) as? [String: Any])
            #expect(counts["devices"] as? Int == devices.count + breaking.count + 1, "seed \(seed): counters agree with the devices")
            #expect(a.stop() == 0)
        }
    }
}

@Suite("Incidents on two PostgreSQL replicas, one killed", .serialized, .enabled(if: PostgresTesting.baseURL != nil))
struct ReplicaIncidentTests {
    /// The devices break with a developer error, which fires in the group that commits it (no timer): every alert
    /// has fired once its post is acknowledged, so the incident's count does not depend on which replica's timers
    /// died with it.
    @Test("30 devices break across two replicas, one is SIGKILLed: Slack gets one incident and one resolve, each once")
    func incidentThroughAKill() async throws {
        let url = try await PostgresTesting.freshDatabase()
        let receiver = TestReceiver()
        try await withReceiver(receiver) { port in
            let environment = [
                "SYNCHEALTH_DATABASE_URL": url, "SYNCHEALTH_INGEST_KEYS": "crash-ingest-0123456789abcdefghijklmnop",
                "SYNCHEALTH_READ_KEYS": "crash-read-0123456789abcdefghijklmnop",
                "SYNCHEALTH_ADMIN_KEYS": "crash-admin-0123456789abcdefghijklmnop", "SYNCHEALTH_GROUP_WAIT": "5s",
                "SYNCHEALTH_WEBHOOK_ALLOW_PRIVATE": "1", "SYNCHEALTH_WEBHOOK_LEASE": "20s", "SYNCHEALTH_DEVICE_RATE_LIMIT": "off",
            ]
            let a = try LiveServer(environment: environment)
            let b = try LiveServer(environment: environment)
            defer {
                a.stop()
                b.stop()
            }
            for server in [a, b] { #expect(try await eventually { try await server.request("GET", "/readyz").status == 200 }) }
            let hook = try await a.request(
                "POST",
                "/v1/webhooks",
                key: "crash-admin-0123456789abcdefghijklmnop",
                body: Data(#"{"url": "http://127.0.0.1:\#(port)/hook", "format": "slack"}"#.utf8)
            )
            #expect(hook.status == 201)
            let replicas = Replicas([a, b])
            let devices = (0..<30).map { "inc-\($0)" }
            // All at once, so that they land well within the group wait however busy the machine is.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for id in devices {
                    group.addTask {
                        try await postUntilAcknowledged(
                            id,
                            breakingEvents(id, at: Timestamp(seconds: Date().timeIntervalSince1970), code: 5),
                            to: replicas
                        )
                    }
                }
                try await group.waitForAll()
            }
            // Killed while the alerts fire and the incident gathers: either replica may be the one that writes it.
            try await Task.sleep(for: .milliseconds(Int.random(in: 500...2_500)))
            kill(b.process.processIdentifier, SIGKILL)
            replicas.remove(b)
            b.process.waitUntilExit()

            func texts() -> [String] { receiver.all.compactMap { $0.json["text"] as? String } }
            // Up to the group wait, then the webhook lease of a message the killed replica had claimed.
            _ = try await eventually(tries: 450, every: .milliseconds(100)) { !texts().isEmpty }
            #expect(texts().count == 1 && texts().first?.contains("on 30 devices") == true, "\(texts())")
            for id in devices {
                try await postUntilAcknowledged(id, recoveryEvents(id, at: Timestamp(seconds: Date().timeIntervalSince1970)), to: replicas)
            }
            _ = try await eventually(tries: 300, every: .milliseconds(100)) { texts().count >= 2 }
            try await Task.sleep(for: .seconds(3))
            // A message b sent and could not record before it died is sent again after its lease, with the same body:
            // delivery is at least once. Two distinct messages, each told once by whichever replica wrote it.
            #expect(Set(texts()).count == 2, "\(texts())")
            #expect(texts().filter { $0.hasPrefix("✅ Resolved") }.count == 1)
            let incidents = try await a.request("GET", "/v1/incidents", key: "crash-read-0123456789abcdefghijklmnop")
            let data = (try JSONSerialization.jsonObject(with: incidents.body) as? [String: Any])?["data"] as? [[String: Any]] ?? []
            #expect(data.count == 1 && data.first?["state"] as? String == "resolved" && data.first?["peakDevices"] as? Int == 30)
        }
    }
}
