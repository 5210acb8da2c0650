import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthStore
import SyncHealthTestSupport
import Synchronization
import Testing

@testable import SyncHealthServer

/// Makes a key through the API; returns its id and secret.
private func makeKey(
    _ client: any TestClientProtocol,
    role: String,
    apps: [String]? = nil,
    expiresAt: String? = nil,
    by key: String = adminKey
) async throws -> (id: String, secret: String) {
    var body: [String: Any] = ["role": role, "description": "\(role) for \(apps ?? ["every app"])"]
    if let apps { body["appIds"] = apps }
    if let expiresAt { body["expiresAt"] = expiresAt }
    let response = try await client.execute(
        uri: "/v1/keys",
        method: .post,
        headers: headers(key, [.contentType: "application/json"]),
        body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body))
    )
    #expect(response.status == .created, "\(String(buffer: response.body))")
    let made = try json(response)
    return (made["id"] as? String ?? "", made["key"] as? String ?? "")
}

extension TestClientProtocol {
    fileprivate func send(_ method: HTTPRequest.Method, _ uri: String, key: String?, body: String? = nil) async throws -> TestResponse {
        try await execute(
            uri: uri,
            method: method,
            headers: headers(key, body == nil ? [:] : [.contentType: "application/json"]),
            body: body.map { ByteBuffer(string: $0) }
        )
    }
}

@Suite("Keys made through the API, limited to apps, revoked at once, audited")
struct KeyScopeTests {
    @Test("a key made through the API works at once, is listed without its secret, and once revoked is refused")
    func lifecycle() async throws {
        try await TestService().test { client in
            let made = try await makeKey(client, role: "read")
            #expect(made.id.hasPrefix("key_") && made.secret.hasPrefix("shk_") && made.secret.count == 47)
            #expect(try await client.get("/v1/summary", key: made.secret).status == .ok)
            let listing = String(buffer: try await client.get("/v1/keys", key: adminKey).body)
            #expect(listing.contains(made.id) && !listing.contains(made.secret), "listed, without the secret")
            #expect(listing.contains(#""source":"environment""#), "the configured keys are listed too")
            #expect(try await client.send(.delete, "/v1/keys/\(made.id)", key: adminKey).status == .noContent)
            let refused = try await client.get("/v1/summary", key: made.secret)
            #expect(refused.status == .unauthorized && refused.headers[.contentType] == "application/problem+json")
            let shown = try json(try await client.get("/v1/keys", key: adminKey))["data"] as? [[String: Any]] ?? []
            #expect(shown.first { $0["id"] as? String == made.id }?["state"] as? String == "revoked")
        }
    }

    @Test("hostile keys: a key id for a secret, a revoked or expired key, a configured key deleted, a bad role or expiry")
    func hostile() async throws {
        let service = TestService()
        try await service.test { client in
            let made = try await makeKey(client, role: "admin", expiresAt: "2026-11-22T11:00:00Z")
            #expect(try await client.get("/v1/summary", key: made.id).status == .unauthorized, "the id is not the secret")
            #expect(try await client.get("/v1/summary", key: String(made.secret.dropLast())).status == .unauthorized)
            #expect(try await client.get("/v1/summary", key: made.secret).status == .ok)
            service.clock.advance(by: .seconds(3600))
            #expect(try await client.get("/v1/summary", key: made.secret).status == .unauthorized, "expired")

            let configured = try json(try await client.get("/v1/keys", key: adminKey))["data"] as? [[String: Any]] ?? []
            let envId = try #require(configured.first { $0["source"] as? String == "environment" }?["id"] as? String)
            let conflict = try await client.send(.delete, "/v1/keys/\(envId)", key: adminKey)
            #expect(conflict.status == .conflict && String(buffer: conflict.body).contains("configured-key"))

            for body in [
                #"{"role": "metrics"}"#, #"{"role": "root"}"#, #"{}"#, #"{"role": "read", "appIds": []}"#,
                #"{"role": "read", "appIds": ["bad app"]}"#, #"{"role": "read", "expiresAt": "2020-01-01T00:00:00Z"}"#,
                #"{"role": "read", "expiresAt": "tomorrow"}"#, #"[1, 2]"#,
            ] {
                let refused = try await client.send(.post, "/v1/keys", key: adminKey, body: body)
                #expect(refused.status == .badRequest && refused.headers[.contentType] == "application/problem+json", "\(body)")
            }
            #expect(try await client.send(.post, "/v1/keys", key: readKey, body: #"{"role": "read"}"#).status == .forbidden)
            #expect(try await client.send(.post, "/v1/keys", key: ingestKey, body: #"{"role": "read"}"#).status == .forbidden)
        }
    }

    @Test("a key made by a key ends no later than its maker, and is revoked with it, down the line; the list says with which")
    func madeKeysFollowTheirMaker() async throws {
        let service = TestService()
        try await service.test { client in
            // The red team's case: an app-scoped admin key that expires in a minute makes a key with no end.
            let maker = try await makeKey(client, role: "admin", apps: ["com.a"], expiresAt: (testStart + .seconds(60)).rfc3339)
            let child = try await makeKey(client, role: "admin", apps: ["com.a"], by: maker.secret)
            let listed = try json(try await client.get("/v1/keys", key: adminKey))["data"] as? [[String: Any]] ?? []
            #expect(listed.first { $0["id"] as? String == child.id }?["expiresAt"] as? String == (testStart + .seconds(60)).rfc3339)
            let later = try await client.send(
                .post,
                "/v1/keys",
                key: maker.secret,
                body: #"{"role": "read", "appIds": ["com.a"], "expiresAt": "\#((testStart + .seconds(3600)).rfc3339)"}"#
            )
            #expect(later.status == .badRequest, "later than the maker: \(String(buffer: later.body))")
            let grandchild = try await makeKey(client, role: "read", apps: ["com.a"], by: child.secret)
            #expect(try await client.get("/v1/summary?appId=com.a", key: grandchild.secret).status == .ok)

            // Revoking the maker revokes what it made, and what those made.
            #expect(try await client.send(.delete, "/v1/keys/\(maker.id)", key: adminKey).status == .noContent)
            #expect(try await client.get("/v1/summary?appId=com.a", key: child.secret).status == .unauthorized)
            #expect(try await client.get("/v1/summary?appId=com.a", key: grandchild.secret).status == .unauthorized)
            let shown = try json(try await client.get("/v1/keys", key: adminKey))["data"] as? [[String: Any]] ?? []
            for id in [child.id, grandchild.id] {
                let entry = shown.first { $0["id"] as? String == id }
                #expect(entry?["state"] as? String == "revoked")
                #expect(entry?["revokedWith"] as? String == maker.id)
            }

        }
    }

    @Test(
        "a key's standing is the earliest end and the first revocation above it, and it ends no later than its makers; the walk ends at configured keys and loops"
    )
    func lineage() {
        func key(_ id: String, by maker: String, expires: Int? = nil, revoked: Bool = false) -> StoredKey {
            StoredKey(
                id: id,
                role: "read",
                appIds: nil,
                description: "",
                secretDigest: [],
                createdAt: testStart,
                expiresAt: expires.map { testStart + .seconds($0) },
                revokedAt: revoked ? testStart : nil,
                createdBy: maker
            )
        }
        // Made before makers bounded their keys: no end of its own, under a maker that ends.
        let lineage = KeyLineage([
            key("key_root", by: "env_1", expires: 120), key("key_old", by: "key_root"), key("key_short", by: "key_old", expires: 60),
            key("key_gone", by: "env_1", revoked: true), key("key_under", by: "key_gone", expires: 500),
            key("key_a", by: "key_b"), key("key_b", by: "key_a", expires: 9),
        ])
        let end = { (seconds: Int64) in testStart + .seconds(seconds) }
        #expect(lineage.standing(of: "key_old") == .init(expiresAt: end(120), revokedWith: nil, endedAt: end(120)))
        #expect(lineage.standing(of: "key_short") == .init(expiresAt: end(60), revokedWith: nil, endedAt: end(60)))
        #expect(lineage.standing(of: "key_under") == .init(expiresAt: end(500), revokedWith: "key_gone", endedAt: testStart), "ended with its maker")
        #expect(
            lineage.standing(of: "key_gone") == .init(expiresAt: nil, revokedWith: nil, endedAt: testStart),
            "its own revocation is its revokedAt"
        )
        #expect(lineage.standing(of: "key_root")?.endedAt == end(120))
        #expect(lineage.standing(of: "key_a")?.expiresAt == testStart + .seconds(9), "a loop ends")
        #expect(lineage.standing(of: "env_1") == nil)
    }

    @Test("the scope matrix: every endpoint, a key for one app against another app's data, and global keys")
    func matrix() async throws {
        var configuration = EngineConfiguration()
        configuration.incidents.groupWait = .seconds(1)
        let service = TestService(configuration: configuration)
        try await service.test { client in
            for (app, device) in [("com.a", "a1"), ("com.a", "a2"), ("com.b", "b1")] {
                try await client.post(
                    batch(
                        device: device,
                        app: app,
                        container: "iCloud.\(app)",
                        [event("n", #""kind": "network", "available": true"#), event("f", "2026-11-22T10:00:01Z", urgentError)]
                    )
                )
            }
            try await service.clock.advanceAndSettle(by: .seconds(2))
            #expect(try await eventually { (try json(try await client.get("/v1/incidents", key: adminKey))["data"] as? [Any])?.count == 2 })
            let incidents = try json(try await client.get("/v1/incidents", key: adminKey))["data"] as? [[String: Any]] ?? []
            let incidentB = try #require(incidents.first { $0["appId"] as? String == "com.b" }?["id"] as? String)
            let incidentA = try #require(incidents.first { $0["appId"] as? String == "com.a" }?["id"] as? String)
            let readA = try await makeKey(client, role: "read", apps: ["com.a"]).secret
            let adminA = try await makeKey(client, role: "admin", apps: ["com.a"]).secret
            let ingestA = try await makeKey(client, role: "ingest", apps: ["com.a"]).secret
            let readAB = try await makeKey(client, role: "read", apps: ["com.a", "com.b"]).secret
            let globalHook =
                try json(
                    try await client.send(.post, "/v1/webhooks", key: adminKey, body: #"{"url": "https://hooks.example.com/all"}"#)
                )["id"] as? String ?? ""
            let globalSilence =
                try json(
                    try await client.send(
                        .post,
                        "/v1/silences",
                        key: adminKey,
                        body: #"{"matchers": {"appId": "com.b"}, "endsAt": "2026-11-23T00:00:00Z"}"#
                    )
                )["id"] as? String ?? ""

            let rows: [(HTTPRequest.Method, String, String?, String, HTTPResponse.Status)] = [
                (.get, "/v1/devices/a1?appId=com.a", nil, readA, .ok),
                (.get, "/v1/devices/a1", nil, readA, .ok),
                (.get, "/v1/devices/b1?appId=com.b", nil, readA, .notFound),
                (.get, "/v1/devices/b1", nil, readA, .notFound),
                (.get, "/v1/devices/b1", nil, readKey, .ok),
                (.get, "/v1/devices", nil, readA, .ok),
                (.get, "/v1/devices?appId=com.b", nil, readA, .forbidden),
                (.get, "/v1/devices", nil, readAB, .badRequest),
                (.get, "/v1/devices?appId=com.b", nil, readAB, .ok),
                (.get, "/v1/summary", nil, readA, .ok),
                (.get, "/v1/summary?appId=com.b", nil, readA, .forbidden),
                (.get, "/v1/summary/scopes", nil, readA, .ok),
                (.get, "/v1/summary/history?appId=com.b", nil, readA, .forbidden),
                (.get, "/v1/summary/history", nil, readA, .ok),
                (.get, "/v1/releases?appId=com.a", nil, readA, .ok),
                (.get, "/v1/releases?appId=com.b", nil, readA, .forbidden),
                (.get, "/v1/alerts", nil, readA, .ok),
                (.get, "/v1/alerts?appId=com.b", nil, readA, .forbidden),
                (.get, "/v1/incidents", nil, readA, .ok),
                (.get, "/v1/incidents/\(incidentA)", nil, readA, .ok),
                (.get, "/v1/incidents/\(incidentB)", nil, readA, .notFound),
                (.get, "/v1/incidents/\(incidentB)", nil, readKey, .ok),
                (.get, "/v1/keys/current", nil, readA, .ok),
                (
                    .post, "/v1/events", String(buffer: batch(device: "a3", app: "com.a", [event("x", #""kind": "network", "available": true"#)])),
                    ingestA, .accepted
                ),
                (
                    .post, "/v1/events", String(buffer: batch(device: "b3", app: "com.b", [event("x", #""kind": "network", "available": true"#)])),
                    ingestA, .forbidden
                ),
                (.post, "/v1/webhooks", #"{"url": "https://hooks.example.com/a", "appIds": ["com.a"]}"#, adminA, .created),
                (.post, "/v1/webhooks", #"{"url": "https://hooks.example.com/b", "appIds": ["com.b"]}"#, adminA, .forbidden),
                (.post, "/v1/webhooks", #"{"url": "https://hooks.example.com/all"}"#, adminA, .forbidden),
                (.post, "/v1/webhooks", #"{"url": "https://hooks.example.com/a", "appIds": ["com.a"]}"#, readA, .forbidden),
                (.get, "/v1/webhooks/\(globalHook)", nil, adminA, .notFound),
                (.delete, "/v1/webhooks/\(globalHook)", nil, adminA, .notFound),
                (.get, "/v1/webhooks/\(globalHook)", nil, adminKey, .ok),
                (.post, "/v1/silences", #"{"matchers": {"appId": "com.a"}, "endsAt": "2026-11-23T00:00:00Z"}"#, adminA, .created),
                (.post, "/v1/silences", #"{"matchers": {"appId": "com.b"}, "endsAt": "2026-11-23T00:00:00Z"}"#, adminA, .forbidden),
                (.post, "/v1/silences", #"{"matchers": {"kind": "syncError"}, "endsAt": "2026-11-23T00:00:00Z"}"#, adminA, .forbidden),
                (.get, "/v1/silences/\(globalSilence)", nil, adminA, .notFound),
                (.delete, "/v1/silences/\(globalSilence)", nil, adminA, .notFound),
                (.delete, "/v1/devices/b1?appId=com.b", nil, adminA, .notFound),
                (.delete, "/v1/devices/a2?appId=com.a", nil, adminA, .noContent),
                (.get, "/v1/backup", nil, adminA, .forbidden),
                (.get, "/v1/audit", nil, adminA, .forbidden),
                (.get, "/v1/audit", nil, readKey, .forbidden),
                (.get, "/v1/audit", nil, adminKey, .ok),
                (.post, "/v1/keys", #"{"role": "read", "appIds": ["com.a"]}"#, adminA, .created),
                (.post, "/v1/keys", #"{"role": "read", "appIds": ["com.a", "com.b"]}"#, adminA, .forbidden),
                (.post, "/v1/keys", #"{"role": "admin"}"#, adminA, .forbidden),
                (.post, "/v1/keys", #"{"role": "read"}"#, readA, .forbidden),
            ]
            for (method, uri, body, key, expected) in rows {
                let response = try await client.send(method, uri, key: key, body: body)
                #expect(response.status == expected, "\(method) \(uri): \(String(buffer: response.body).prefix(300))")
                if response.status.code >= 400 {
                    #expect(response.headers[.contentType] == "application/problem+json", "\(method) \(uri)")
                }
            }

            // What a key for com.a reads holds com.a's data only.
            let devices = try json(try await client.get("/v1/devices", key: readA))["data"] as? [[String: Any]] ?? []
            #expect(Set(devices.compactMap { $0["appId"] as? String }) == ["com.a"])
            #expect(try json(try await client.get("/v1/summary", key: readA))["devices"] as? Int == 2, "a1 and a3 (a2 was erased)")
            let scopes = try json(try await client.get("/v1/summary/scopes", key: readA))["data"] as? [[String: Any]] ?? []
            #expect(!scopes.isEmpty && scopes.allSatisfy { $0["appId"] as? String == "com.a" })
            let alerts = try json(try await client.get("/v1/alerts", key: readA))["data"] as? [[String: Any]] ?? []
            #expect(!alerts.isEmpty && alerts.allSatisfy { $0["appId"] as? String == "com.a" })
            let listed = try json(try await client.get("/v1/incidents", key: readA))["data"] as? [[String: Any]] ?? []
            #expect(listed.map { $0["id"] as? String } == [incidentA])
            let hooks = try json(try await client.get("/v1/webhooks", key: adminA))["data"] as? [[String: Any]] ?? []
            #expect(hooks.count == 1 && (hooks[0]["appIds"] as? [String]) == ["com.a"])
            let silences = try json(try await client.get("/v1/silences", key: adminA))["data"] as? [[String: Any]] ?? []
            #expect(silences.count == 1)
            let current = try json(try await client.get("/v1/keys/current", key: readA))
            #expect(current["role"] as? String == "read" && current["appIds"] as? [String] == ["com.a"])
            let keys = try json(try await client.get("/v1/keys", key: adminA))["data"] as? [[String: Any]] ?? []
            #expect(keys.allSatisfy { ($0["appIds"] as? [String]) == ["com.a"] }, "a scoped admin sees its apps' keys only")

            // The audit log: who did what, from where.
            let audit = try json(try await client.get("/v1/audit?limit=100", key: adminKey))["data"] as? [[String: Any]] ?? []
            let actions = Set(audit.compactMap { $0["action"] as? String })
            #expect(actions.isSuperset(of: ["key.create", "webhook.create", "silence.create", "device.erase"]), "\(actions)")
            let erasure = try #require(audit.first { $0["action"] as? String == "device.erase" })
            #expect(erasure["target"] as? String == "com.a/a2" && (erasure["keyId"] as? String)?.hasPrefix("key_") == true)
            let global = try #require(audit.first { $0["action"] as? String == "webhook.create" && $0["target"] as? String == globalHook })
            #expect((global["keyId"] as? String)?.hasPrefix("env_") == true && global["address"] as? String != nil)
        }
    }
}

/// Makes a key through a live server's API.
private func makeLiveKey(_ server: LiveServer, admin: String, _ body: String) async throws -> (id: String, secret: String) {
    let response = try await server.request("POST", "/v1/keys", key: admin, body: Data(body.utf8))
    let made = try JSONSerialization.jsonObject(with: response.body) as? [String: Any] ?? [:]
    #expect(response.status == 201, "\(made)")
    return (made["id"] as? String ?? "", made["key"] as? String ?? "")
}

@Suite("Keys against the live binary", .serialized)
struct LiveKeyTests {
    static let admin = "keys-admin-0123456789abcdefghijklmnop"

    @Test("a made key's secret is in no file of the data directory, no backup, no log line and not in /metrics")
    func secretNowhere() async throws {
        let server = try LiveServer(environment: ["SYNCHEALTH_ADMIN_KEYS": Self.admin, "SYNCHEALTH_LOG_LEVEL": "trace"])
        try await server.waitUntilReady()
        let made = try await makeLiveKey(server, admin: Self.admin, #"{"role": "ingest", "appIds": ["com.a"], "description": "app a"}"#)
        let body = Data(
            #"{"device": {"deviceId": "k", "appId": "com.a"}, "events": [{"eventId": "a", "occurredAt": "2026-11-22T10:00:00Z", "kind": "heartbeat"}]}"#
                .utf8
        )
        #expect(try await server.request("POST", "/v1/events", key: made.secret, body: body).status == 202)
        #expect(try await server.request("GET", "/v1/summary", key: made.secret + "x").status == 401)
        let backup = try await server.request("GET", "/v1/backup", key: Self.admin)
        #expect(backup.status == 200 && backup.body.count > 4096)
        let metrics = try await server.request("GET", "/metrics")
        // Written within a second: the key's last use.
        #expect(
            try await eventually {
                let keys = try JSONSerialization.jsonObject(with: try await server.request("GET", "/v1/keys", key: Self.admin).body) as? [String: Any]
                return (keys?["data"] as? [[String: Any]])?.contains { $0["id"] as? String == made.id && $0["lastUsedAt"] as? String != nil } == true
            },
            "the key's last use is recorded"
        )
        #expect(server.stop() == 0)

        let secret = Data(made.secret.utf8)
        // The part after the prefix alone, in case something stored it without: 43 random characters.
        let random = Data(made.secret.dropFirst(4).utf8)
        var files: [String] = []
        let enumerator = FileManager.default.enumerator(atPath: server.dataDirectory)
        while let name = enumerator?.nextObject() as? String { files.append(name) }
        #expect(!files.isEmpty)
        for name in files {
            let bytes = FileManager.default.contents(atPath: server.dataDirectory + "/" + name) ?? Data()
            #expect(bytes.range(of: secret) == nil && bytes.range(of: random) == nil, "\(name) holds the secret")
        }
        #expect(backup.body.range(of: random) == nil, "the backup holds the secret")
        #expect(metrics.body.range(of: random) == nil)
        let log = server.captured.text.withLock { $0 }
        #expect(log.contains("Monitor engine ready") && !log.contains(String(made.secret.dropFirst(4))))
    }

    @Test(
        "two PostgreSQL replicas: a key made on A works on B within a second; revoked on A, B refuses it within a second",
        .enabled(if: PostgresTesting.baseURL != nil)
    )
    func revocationAcrossReplicas() async throws {
        let url = try await PostgresTesting.freshDatabase()
        let environment = ["SYNCHEALTH_DATABASE_URL": url, "SYNCHEALTH_ADMIN_KEYS": Self.admin]
        let a = try LiveServer(environment: environment)
        let b = try LiveServer(environment: environment)
        defer {
            a.stop()
            b.stop()
        }
        try await a.waitUntilReady()
        try await b.waitUntilReady()
        let made = try await makeLiveKey(a, admin: Self.admin, #"{"role": "read"}"#)
        let madeAt = ContinuousClock.now
        while try await b.request("GET", "/v1/summary", key: made.secret).status != 200 {
            #expect(ContinuousClock.now - madeAt < .seconds(1), "B did not accept the key within a second")
            if ContinuousClock.now - madeAt > .seconds(5) { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try await a.request("DELETE", "/v1/keys/\(made.id)", key: Self.admin).status == 204)
        let revokedAt = ContinuousClock.now
        #expect(try await a.request("GET", "/v1/summary", key: made.secret).status == 401, "refused at once where it was revoked")
        while try await b.request("GET", "/v1/summary", key: made.secret).status != 401 {
            #expect(ContinuousClock.now - revokedAt < .seconds(1), "B still accepted the revoked key after a second")
            if ContinuousClock.now - revokedAt > .seconds(5) { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        let audit = try JSONSerialization.jsonObject(with: try await b.request("GET", "/v1/audit", key: Self.admin).body) as? [String: Any]
        let actions = (audit?["data"] as? [[String: Any]] ?? []).compactMap { $0["action"] as? String }
        #expect(actions == ["key.revoke", "key.create"], "one audit log for every replica")
    }
}

@Suite("What a key limited to apps is sent")
struct LimitedStreamTests {
    @Test("the stream sends a key limited to apps their alerts and scopes only, and nothing when nothing is left")
    func limited() {
        var other = alert("al_2", .syncError, .firing)
        other.appId = "com.other"
        var fleet = alert("al_3", .fleetDegraded, .firing)
        fleet.appId = nil
        let alerts = LiveFeed.Content.alerts([("1", alert("al_1", .syncError, .firing)), ("2", other), ("3", fleet)])
        guard case .alerts(let mine)? = alerts.limited(to: ["com.example"]) else {
            Issue.record("no alerts left")
            return
        }
        #expect(mine.map(\.alert.id) == ["al_1"])
        #expect(alerts.limited(to: ["com.none"]) == nil)
        guard case .alerts(let all)? = alerts.limited(to: nil) else { return }
        #expect(all.count == 3, "a global key gets everything")

        let scopes = LiveFeed.Content.summaries([
            (FleetScope(appId: nil, containerId: nil), FleetCounts()), (FleetScope(appId: "com.example", containerId: nil), FleetCounts()),
            (FleetScope(appId: "com.other", containerId: "iCloud.o"), FleetCounts()),
        ])
        guard case .summaries(let shown)? = scopes.limited(to: ["com.example"]) else {
            Issue.record("no scopes left")
            return
        }
        #expect(shown.map(\.scope.appId) == ["com.example"], "not the whole fleet's, not another app's")
        guard case .keepalive? = LiveFeed.Content.keepalive.limited(to: ["com.example"]) else {
            Issue.record("keepalives go to everyone")
            return
        }
    }

    @Test("with a metrics key set, /metrics refuses a read key limited to apps: its series name every app")
    func metrics() async throws {
        let keys = KeyRing(ingest: [ingestKey], read: [readKey], admin: [adminKey], metrics: ["test-metrics-0123456789"])
        try await TestService(keys: keys).test { client in
            let made = try await makeKey(client, role: "read", apps: ["com.a"])
            #expect(try await client.get("/metrics", key: made.secret).status == .forbidden)
            #expect(try await client.get("/metrics", key: readKey).status == .ok)
            #expect(try await client.get("/metrics", key: "test-metrics-0123456789").status == .ok)
        }
    }
}
