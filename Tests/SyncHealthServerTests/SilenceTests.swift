import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthPostgres
import SyncHealthSQLite
import SyncHealthStore
import SyncHealthTestSupport
import SyncHealthWebhooks
import Synchronization
import Testing

@testable import SyncHealthServer

/// Creates a silence; returns its JSON.
func createSilence(_ client: any TestClientProtocol, _ body: String) async throws -> [String: Any] {
    let response = try await client.execute(uri: "/v1/silences", method: .post, headers: headers(adminKey), body: ByteBuffer(string: body))
    #expect(response.status == .created, "\(String(buffer: response.body))")
    return try json(response)
}

@Suite("Silences")
struct SilenceTests {
    static var privateAllowed: WebhookConfiguration {
        var c = WebhookConfiguration()
        c.allowPrivate = true
        return c
    }

    func breakDevice(_ client: any TestClientProtocol, _ device: String, app: String = "com.example.notes", version: String = "3.4") async throws {
        try await client.post(
            ByteBuffer(
                string:
                    #"{"device": {"deviceId": "\#(device)", "appId": "\#(app)", "containerId": "iCloud.\#(app)", "appVersion": "\#(version)"}, "events": [\#(event("n", #""kind": "network", "available": true"#)), \#(event("f", "2026-11-22T10:00:01Z", urgentError))]}"#
            )
        )
    }

    func recover(_ client: any TestClientProtocol, _ device: String, app: String = "com.example.notes") async throws {
        try await client.post(
            batch(device: device, app: app, [event("s", "2026-11-22T10:00:05Z", #""kind": "activity", "phase": "export", "state": "started""#)])
        )
    }

    func firingAlerts(_ client: any TestClientProtocol) async throws -> [[String: Any]] {
        try json(try await client.get("/v1/alerts?state=firing"))["data"] as? [[String: Any]] ?? []
    }

    @Test("created with at least one matcher and an end; listed, fetched; DELETE ends it and keeps it as expired; bad ones are 400")
    func management() async throws {
        let service = TestService()
        try await service.test { client in
            for body in [
                #"{"matchers": {}, "endsAt": "2026-11-23T10:00:00Z"}"#, #"{"matchers": {"appId": "a"}}"#,
                #"{"matchers": {"kind": "nope"}, "endsAt": "2026-11-23T10:00:00Z"}"#,
                #"{"matchers": {"appId": "a"}, "endsAt": "2020-01-01T00:00:00Z"}"#, #"{"matchers": {"appId": "a"}, "endsAt": "soon"}"#,
            ] {
                let response = try await client.execute(
                    uri: "/v1/silences",
                    method: .post,
                    headers: headers(adminKey),
                    body: ByteBuffer(string: body)
                )
                #expect(response.status == .badRequest, "\(body)")
            }
            let readOnly = try await client.execute(
                uri: "/v1/silences",
                method: .post,
                headers: headers(readKey),
                body: ByteBuffer(string: #"{"matchers": {"appId": "a"}, "endsAt": "2030-01-01T00:00:00Z"}"#)
            )
            #expect(readOnly.status == .forbidden)
            let created = try await createSilence(
                client,
                #"{"matchers": {"appId": "com.example.notes", "appVersion": "3.4"}, "endsAt": "2030-01-01T00:00:00Z", "comment": "3.4 is broken"}"#
            )
            let id = try #require(created["id"] as? String)
            #expect(id.hasPrefix("si_"))
            #expect(created["state"] as? String == "active")
            #expect(created["startsAt"] as? String == testStart.rfc3339, "startsAt defaults to now")
            #expect(created["matchers"] as? [String: String] == ["appId": "com.example.notes", "appVersion": "3.4"])
            #expect((try json(try await client.get("/v1/silences", key: adminKey))["data"] as? [[String: Any]])?.count == 1)
            #expect(try json(try await client.get("/v1/silences/\(id)", key: adminKey))["comment"] as? String == "3.4 is broken")
            let ended = try await client.execute(uri: "/v1/silences/\(id)", method: .delete, headers: headers(adminKey))
            #expect(ended.status == .ok)
            #expect(try json(ended)["state"] as? String == "expired")
            #expect(try json(try await client.get("/v1/silences/\(id)", key: adminKey))["state"] as? String == "expired", "kept")
            #expect(try await client.get("/v1/silences/si_nope", key: adminKey).status == .notFound)
        }
    }

    @Test("a silenced alert is listed with silencedBy and not delivered; deleting the silence while it fires delivers it then")
    func heldThenReleased() async throws {
        let transport = RecordingTransport()
        let clock = ManualClock(testStart)
        let service = TestService(clock: clock, transport: transport, webhooks: Self.privateAllowed)
        try await service.test { client in
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/hook"}"#)
            let silence = try #require(
                try await createSilence(
                    client,
                    #"{"matchers": {"appId": "com.example.notes", "appVersion": "3.4"}, "endsAt": "2030-01-01T00:00:00Z"}"#
                )["id"] as? String
            )
            try await breakDevice(client, "held")
            try await breakDevice(client, "other-version", version: "3.5")
            #expect(try await eventually { transport.sent.withLock { $0.count } == 1 }, "only the device the silence does not match")
            let firing = try await firingAlerts(client)
            #expect(firing.first { $0["deviceId"] as? String == "held" }?["silencedBy"] as? [String] == [silence], "still fires, and is listed")
            #expect(firing.first { $0["deviceId"] as? String == "other-version" }?["silencedBy"] as? [String] == [])

            clock.advance(by: .seconds(5))
            #expect(try await client.execute(uri: "/v1/silences/\(silence)", method: .delete, headers: headers(adminKey)).status == .ok)
            #expect(try await eventually { transport.sent.withLock { $0.count } == 2 }, "delivered once the silence ended")
            let released = try #require(transport.sent.withLock { $0.last })
            let body = try #require(try JSONSerialization.jsonObject(with: Data(released.body)) as? [String: Any])
            #expect(body["type"] as? String == "alert.firing")
            #expect((body["data"] as? [String: Any])?["deviceId"] as? String == "held")
            #expect((body["data"] as? [String: Any])?["silencedBy"] == nil, "webhook bodies do not carry silencedBy")
            try await Task.sleep(for: .milliseconds(200))
            #expect(transport.sent.withLock { $0.count } == 2, "exactly once")
        }
    }

    @Test("an alert that fired and resolved under a silence is never delivered, even after the silence ends by its time")
    func resolvedMeanwhile() async throws {
        let transport = RecordingTransport()
        let clock = ManualClock(testStart)
        let service = TestService(clock: clock, transport: transport, webhooks: Self.privateAllowed)
        try await service.test { client in
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/hook"}"#)
            _ = try await createSilence(client, #"{"matchers": {"deviceId": "brief"}, "endsAt": "\#((testStart + .seconds(600)).rfc3339)"}"#)
            try await breakDevice(client, "brief")
            try await recover(client, "brief")
            // The release runs at the silence's end.
            try await clock.advanceAndSettle(by: .seconds(601))
            #expect(transport.sent.withLock { $0.count } == 0)
            // A device that breaks now, after the silence, is delivered as usual.
            try await breakDevice(client, "brief-2")
            #expect(try await eventually { transport.sent.withLock { $0.count } == 1 })
        }
    }

    @Test("an alert delivered before a silence still has its resolve delivered during it; one fired under it does not")
    func resolveFollowsDeliveredFire() async throws {
        let transport = RecordingTransport()
        let clock = ManualClock(testStart)
        let service = TestService(clock: clock, transport: transport, webhooks: Self.privateAllowed)
        try await service.test { client in
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/hook"}"#)
            try await breakDevice(client, "early")
            #expect(try await eventually { transport.sent.withLock { $0.count } == 1 })
            clock.advance(by: .seconds(5))
            _ = try await createSilence(client, #"{"matchers": {"appId": "com.example.notes"}, "endsAt": "\#((testStart + .seconds(600)).rfc3339)"}"#)
            try await breakDevice(client, "late")
            try await recover(client, "late")
            try await recover(client, "early")
            #expect(try await eventually { transport.sent.withLock { $0.count } == 2 })
            let types = transport.sent.withLock { $0.map { String(decoding: $0.body, as: UTF8.self) } }
            #expect(types[1].contains(#""type":"alert.resolved""#) && types[1].contains("early"))
            try await Task.sleep(for: .milliseconds(200))
            #expect(transport.sent.withLock { $0.count } == 2, "nothing for the alert that fired and resolved under the silence")
        }
    }

    @Test("a silence survives a restart", arguments: [EngineStore.sqlite])
    func survivesRestart(store: EngineStore) async throws {
        let directory = temporaryDirectory()
        let transport = RecordingTransport()
        try await TestService(
            store: .local(try SQLiteStore(directory: directory, synchronous: .normal)),
            transport: transport,
            webhooks: Self.privateAllowed
        ).test { client in
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/hook"}"#)
            _ = try await createSilence(client, #"{"matchers": {"appId": "com.example.notes"}, "endsAt": "2030-01-01T00:00:00Z"}"#)
        }
        try await TestService(
            store: .local(try SQLiteStore(directory: directory, synchronous: .normal)),
            transport: transport,
            webhooks: Self.privateAllowed
        ).test { client in
            #expect((try json(try await client.get("/v1/silences", key: adminKey))["data"] as? [[String: Any]])?.count == 1)
            try await breakDevice(client, "after-restart")
            #expect(try await eventually { try await firingAlerts(client).count == 1 })
            try await Task.sleep(for: .milliseconds(200))
            #expect(transport.sent.withLock { $0.count } == 0, "still silenced after the restart")
        }
    }

    @Test(
        "on two replicas over one PostgreSQL database, a silence created on one holds on the other",
        .enabled(if: PostgresTesting.baseURL != nil)
    )
    func replicasAgree() async throws {
        let url = try await PostgresTesting.freshDatabase()
        let transport = RecordingTransport()
        let a = TestService(store: .shared(try PostgresStore(url: url, logger: testLogger())), transport: transport, webhooks: Self.privateAllowed)
        let b = TestService(store: .shared(try PostgresStore(url: url, logger: testLogger())), transport: transport, webhooks: Self.privateAllowed)
        try await a.test { clientA in
            _ = try await createWebhook(clientA, json: #"{"url": "http://127.0.0.1:9/hook"}"#)
            let silence = try #require(
                try await createSilence(clientA, #"{"matchers": {"containerId": "iCloud.com.example.notes"}, "endsAt": "2030-01-01T00:00:00Z"}"#)[
                    "id"
                ] as? String
            )
            try await b.test { clientB in
                #expect(try json(try await clientB.get("/v1/silences/\(silence)", key: adminKey))["id"] as? String == silence)
                try await breakDevice(clientB, "on-b")
                #expect(try await eventually { try await firingAlerts(clientB).first?["silencedBy"] as? [String] == [silence] })
                try await Task.sleep(for: .milliseconds(300))
                #expect(transport.sent.withLock { $0.count } == 0, "the replica that did not create it holds it too")
            }
        }
    }
}
