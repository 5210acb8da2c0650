import Foundation
import NIOCore
import SyncHealthCore
import SyncHealthEngineTesting
import SyncHealthStore
import SyncHealthTestSupport
import SyncHealthWebhooks
import Synchronization
import Testing

@testable import SyncHealthEngine

@Suite("Engine: attestedOnly subscriptions hear of attested devices only, from fire to resolve")
struct EngineAttestedOnlyTests {
    static let app = "com.example.notes"

    /// Posts `body` as the service does once App Attest has judged the request: `attested` if it carried a valid
    /// assertion of the device's key.
    static func post(_ h: EngineHarness, _ body: ByteBuffer, attested: Bool) async throws {
        var batch = try EventBatch.decode(json: Data(body.readableBytesView))
        batch.attested = attested
        _ = try await h.engine.ingest(batch)
    }

    static func breakDevice(_ device: String, _ n: Int, at time: String = "2026-11-22T10:00:01Z") -> ByteBuffer {
        batch(device: device, [event("n\(n)", #""kind": "network", "available": true"#), event("f\(n)", time, urgentError)])
    }

    static func recover(_ device: String, _ n: Int) -> ByteBuffer {
        batch(device: device, [event("s\(n)", "2026-11-22T10:00:05Z", #""kind": "activity", "phase": "export", "state": "started""#)])
    }

    /// The (type, deviceId) of each Standard Webhooks message sent to `url`, in order.
    static func told(_ h: EngineHarness, _ url: String) -> [String] {
        h.transport.sent.withLock { $0 }.filter { $0.url == url }.compactMap { request in
            guard let body = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any] else { return nil }
            let data = body["data"] as? [String: Any]
            return "\(body["type"] as? String ?? "?") \(data?["deviceId"] as? String ?? "\(data?["devices"] ?? "?") devices")"
        }
    }

    @Test(
        "device alerts: the attested device's fire and resolve reach both, an unsigned upload cannot resolve it; the forged one's only the other",
        arguments: EngineStore.withShared
    )
    func deviceAlerts(_ kind: EngineStore) async throws {
        try await EngineHarness(store: try await kind.make(), webhooks: .privateAllowed).run { h in
            _ = try await h.delivery.webhooks.create(WebhookRequestFields(url: "http://127.0.0.1:9/all"))
            _ = try await h.delivery.webhooks.create(WebhookRequestFields(url: "http://127.0.0.1:9/attested", attestedOnly: true))
            try await Self.post(h, Self.breakDevice("genuine", 1), attested: true)
            try await Self.post(h, Self.breakDevice("forged", 1), attested: false)
            h.clock.advance(by: .seconds(1))
            // Unsigned, while its alert fires (anyone with the ingest key can send it): nothing of it is applied, so
            // it cannot clear the genuine device's page.
            try await Self.post(h, Self.recover("genuine", 9), attested: false)
            #expect(try await h.deliveredWhenDrained() == 3)
            #expect(Self.told(h, "http://127.0.0.1:9/attested") == ["alert.firing genuine"])
            // Its own signed upload resolves it, on both lines.
            try await Self.post(h, Self.recover("genuine", 1), attested: true)
            #expect(try await h.deliveredWhenDrained() == 5)
            #expect(Self.told(h, "http://127.0.0.1:9/attested") == ["alert.firing genuine", "alert.resolved genuine"])
            #expect(Set(Self.told(h, "http://127.0.0.1:9/all")) == ["alert.firing genuine", "alert.firing forged", "alert.resolved genuine"])

            // Its alerts quiet, the unsigned upload that follows makes it unattested: its next break is not told
            // to the attestedOnly subscription.
            h.clock.advance(by: .seconds(1))
            try await Self.post(
                h,
                batch(device: "genuine", [event("q2", "2026-11-22T10:00:06Z", #""kind": "network", "available": true"#)]),
                attested: false
            )
            #expect(try await h.engine.device(DeviceKey(appId: Self.app, deviceId: "genuine"))?.record.attested == false)
            h.clock.advance(by: .seconds(1))
            try await Self.post(h, Self.breakDevice("genuine", 3, at: "2026-11-22T10:00:07Z"), attested: false)
            #expect(try await h.deliveredWhenDrained() == 6)
            #expect(Self.told(h, "http://127.0.0.1:9/attested").count == 2)
        }
    }

    @Test("incidents: an attestedOnly subscription is told of an incident counted over attested devices alone", arguments: EngineStore.withShared)
    func incidents(_ kind: EngineStore) async throws {
        var configuration = EngineConfiguration()
        configuration.incidents.groupWait = .seconds(30)
        let harness = EngineHarness(store: try await kind.make(), configuration: configuration, webhooks: .privateAllowed, drivenDecisions: true)
        try await harness.run { h in
            _ = try await h.delivery.webhooks.create(WebhookRequestFields(url: "http://127.0.0.1:9/every", grouping: "incident"))
            _ = try await h.delivery.webhooks.create(
                WebhookRequestFields(url: "http://127.0.0.1:9/attested", grouping: "incident", attestedOnly: true)
            )
            try await Self.post(h, Self.breakDevice("genuine", 1), attested: true)
            for i in 0..<3 { try await Self.post(h, Self.breakDevice("forged-\(i)", 1), attested: false) }
            try await h.advance(by: .seconds(31))
            try await IncidentWatch(engine: h.engine, delivery: h.delivery, logger: testLogger()).step()
            #expect(try await h.deliveredWhenDrained() == 2)
            #expect(Self.told(h, "http://127.0.0.1:9/every") == ["incident.opened 4 devices"])
            #expect(Self.told(h, "http://127.0.0.1:9/attested") == ["incident.opened 1 devices"])

            let every = try await h.engine.incidents(IncidentQuery())
            #expect(every.incidents.map(\.devices) == [4], "the list shows incidents of every device unless asked")
            let attested = try await h.engine.incidents(IncidentQuery(attestedOnly: true))
            #expect(attested.incidents.map(\.devices) == [1])
            #expect(attested.incidents.first?.key.attestedOnly == true)
            let both = try await h.engine.incidents(IncidentQuery(attestedOnly: nil))
            #expect(both.incidents.count == 2)
            let attestedIncident = try #require(attested.incidents.first)
            #expect(try await h.engine.devices(of: attestedIncident).map(\.key.deviceId) == ["genuine"])

            // The genuine device recovers: the attested incident resolves; the other still has three devices.
            h.clock.advance(by: .seconds(1))
            try await Self.post(h, Self.recover("genuine", 1), attested: true)
            try await IncidentWatch(engine: h.engine, delivery: h.delivery, logger: testLogger()).step()
            #expect(try await h.deliveredWhenDrained() == 3)
            #expect(Self.told(h, "http://127.0.0.1:9/attested") == ["incident.opened 1 devices", "incident.resolved 0 devices"])
            #expect(Self.told(h, "http://127.0.0.1:9/every") == ["incident.opened 4 devices"])
        }
    }

    @Test("an attestedOnly subscription that names only fleet or release kinds is refused: those count every device")
    func fleetKindsRefused() async throws {
        try await EngineHarness(webhooks: .privateAllowed).run { h in
            await #expect(throws: WebhookError.self) {
                _ = try await h.delivery.webhooks.create(
                    WebhookRequestFields(url: "http://127.0.0.1:9/x", kinds: ["fleetDegraded", "releaseRegression"], attestedOnly: true)
                )
            }
            let mixed = try await h.delivery.webhooks.create(
                WebhookRequestFields(url: "http://127.0.0.1:9/x", kinds: ["fleetDegraded", "syncError"], attestedOnly: true)
            )
            #expect(mixed.attestedOnly)
            let stored = try await h.store.webhooks().first { $0.id == mixed.id }
            #expect(stored?.attestedOnly == true, "kept in the store's options")
        }
    }
}
