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
    func breakDevice(_ client: any TestClientProtocol, _ device: String, app: String = "com.example.notes", version: String = "3.4") async throws {
        try await client.post(
            ByteBuffer(
                string:
                    #"{"device": {"deviceId": "\#(device)", "appId": "\#(app)", "containerId": "iCloud.\#(app)", "appVersion": "\#(version)"}, "events": [\#(event("n", #""kind": "network", "available": true"#)), \#(event("f", "2026-11-22T10:00:01Z", urgentError))]}"#
            )
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

    @Test("GET /v1/alerts lists a silenced alert with the silences that hold it, and an unheld one with none")
    func listedWithSilencedBy() async throws {
        let service = TestService()
        try await service.test { client in
            let silence = try #require(
                try await createSilence(
                    client,
                    #"{"matchers": {"appId": "com.example.notes", "appVersion": "3.4"}, "endsAt": "2030-01-01T00:00:00Z"}"#
                )["id"] as? String
            )
            try await breakDevice(client, "held")
            try await breakDevice(client, "other-version", version: "3.5")
            let firing = try await firingAlerts(client)
            #expect(firing.first { $0["deviceId"] as? String == "held" }?["silencedBy"] as? [String] == [silence], "still fires, and is listed")
            #expect(firing.first { $0["deviceId"] as? String == "other-version" }?["silencedBy"] as? [String] == [])
        }
    }
}
