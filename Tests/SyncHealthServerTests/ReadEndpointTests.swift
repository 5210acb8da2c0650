import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import NIOFoundationEssentialsCompat
import SyncHealthCore
import SyncHealthEngine
import SyncHealthPostgres
import SyncHealthStore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthServer

@Suite("Read endpoints: devices, summary, alerts")
struct ReadEndpointTests {
    @Test("a device's status carries every field of the contract")
    func deviceStatus() async throws {
        let service = TestService()
        try await service.test { client in
            try await client.post(
                batch(
                    healthyEvents + [
                        event(
                            "f",
                            "2026-11-22T10:00:04Z",
                            #""kind": "activity", "phase": "export", "state": "failed", "error": {"domain": "CKErrorDomain", "code": 25, "message": "quota"}"#
                        ),
                        event("p", "2026-11-22T10:00:05Z", #""kind": "pending", "pendingChanges": 2, "oldestPendingAt": "2026-11-22T09:59:00Z""#),
                    ]
                )
            )
            let response = try await client.get("/v1/devices/dev-1?appId=com.example.notes")
            #expect(response.status == .ok)
            let s = try json(response)
            for field in [
                "deviceId", "appId", "containerId", "platform", "osVersion", "appVersion", "firstSeenAt", "lastSeenAt",
                "setupState", "importState", "exportState", "isNetworkAvailable", "accountStatus", "setupError", "importError",
                "exportError", "lastSyncError", "hasSyncError", "isNotSyncing", "syncStateSummary", "isBroken", "isInProgress",
                "symbolName", "symbolColor", "description", "pendingChanges", "oldestPendingAt", "silent", "alerts",
            ] {
                #expect(s.keys.contains(field), "missing \(field)")
            }
            #expect(s["syncStateSummary"] as? String == "error")
            #expect(s["symbolName"] as? String == "exclamationmark.icloud")
            #expect(s["symbolColor"] as? String == "red")
            #expect(s["description"] as? String == "Error")
            #expect(s["isBroken"] as? Bool == true)
            #expect(s["osVersion"] is NSNull)
            #expect(s["pendingChanges"] as? Int == 2)
            #expect(s["oldestPendingAt"] as? String == "2026-11-22T09:59:00Z")
            let export = try #require(s["exportState"] as? [String: Any])
            #expect(export["status"] as? String == "failed")
            let error = try #require(s["exportError"] as? [String: Any])
            #expect(error["class"] as? String == "userAction")
            #expect(error["code"] as? Int == 25)
            #expect((s["lastSyncError"] as? [String: Any])?["class"] as? String == "userAction")
            #expect(s["setupError"] is NSNull)
        }
    }

    @Test("unknown devices are 404; an id in two apps without appId is 409")
    func lookup() async throws {
        let service = TestService()
        try await service.test { client in
            #expect(try await client.get("/v1/devices/nobody").status == .notFound)
            try await client.post(batch(device: "shared", app: "app.one", healthyEvents))
            #expect(try await client.get("/v1/devices/shared").status == .ok)
            try await client.post(batch(device: "shared", app: "app.two", healthyEvents))
            #expect(try await client.get("/v1/devices/shared").status == .conflict)
            #expect(try await client.get("/v1/devices/shared?appId=app.two").status == .ok)
            #expect(try await client.get("/v1/devices/shared?appId=app.three").status == .notFound)
        }
    }

    @Test(
        "the device list filters and pages with a cursor, whatever the devices looked at per hold of the cache lock",
        arguments: [8_192, 2, 1]
    )
    func list(chunk: Int) async throws {
        var configuration = EngineConfiguration()
        configuration.listScanChunk = chunk
        let service = TestService(configuration: configuration)
        try await service.test { client in
            for i in 0..<5 { try await client.post(batch(device: "ok-\(i)", healthyEvents)) }
            for i in 0..<3 { try await client.post(batch(device: "ns-\(i)", container: "iCloud.other", notSyncingEvents)) }
            var ids: [String] = []
            var cursor: String?
            var pages = 0
            repeat {
                let page = try json(try await client.get("/v1/devices?limit=3" + (cursor.map { "&cursor=\($0)" } ?? "")))
                ids += (page["data"] as? [[String: Any]] ?? []).compactMap { $0["deviceId"] as? String }
                cursor = page["nextCursor"] as? String
                pages += 1
            } while cursor != nil && pages < 10
            #expect(ids == ["ok-0", "ok-1", "ok-2", "ok-3", "ok-4", "ns-0", "ns-1", "ns-2"])
            #expect(pages == 3)

            func deviceIds(_ query: String) async throws -> [String] {
                let page = try json(try await client.get("/v1/devices?\(query)"))
                return (page["data"] as? [[String: Any]] ?? []).compactMap { $0["deviceId"] as? String }
            }
            #expect(try await deviceIds("broken=true") == ["ns-0", "ns-1", "ns-2"])
            #expect(try await deviceIds("summary=succeeded&limit=2") == ["ok-0", "ok-1"])
            #expect(try await deviceIds("containerId=iCloud.other&broken=false").isEmpty)
            #expect(try await deviceIds("appId=com.example.notes&summary=notSyncing").count == 3)
            #expect(try await client.get("/v1/devices?summary=bogus").status == .badRequest)
            #expect(try await client.get("/v1/devices?broken=maybe").status == .badRequest)
            #expect(try await client.get("/v1/devices?limit=0").status == .badRequest)
            #expect(try await client.get("/v1/devices?limit=1001").status == .badRequest)
            #expect(try await client.get("/v1/devices?cursor=-4").status == .badRequest)
        }
    }

    @Test("the fleet summary counts every summary value, by scope")
    func summary() async throws {
        let service = TestService()
        try await service.test { client in
            for i in 0..<4 { try await client.post(batch(device: "ok-\(i)", healthyEvents)) }
            try await client.post(batch(device: "ns", container: "iCloud.other", notSyncingEvents))
            try await client.post(batch(device: "other-app", app: "com.other", healthyEvents))
            let all = try json(try await client.get("/v1/summary"))
            #expect(all["devices"] as? Int == 6)
            #expect(all["active"] as? Int == 6)
            #expect(all["silent"] as? Int == 0)
            #expect(all["broken"] as? Int == 1)
            #expect(all["notSyncing"] as? Int == 1)
            let bySummary = try #require(all["bySummary"] as? [String: Int])
            #expect(Set(bySummary.keys) == Set(SyncStateSummary.allCases.map(\.rawValue)))
            #expect(bySummary["succeeded"] == 5 && bySummary["notSyncing"] == 1)
            #expect(Set((all["byErrorClass"] as? [String: Int] ?? [:]).keys) == Set(ErrorClass.allCases.map(\.rawValue)))
            #expect(all["generatedAt"] as? String == testStart.rfc3339)
            #expect(try json(try await client.get("/v1/summary?appId=com.other"))["devices"] as? Int == 1)
            #expect(try json(try await client.get("/v1/summary?containerId=iCloud.other"))["devices"] as? Int == 1)
            #expect(
                try json(try await client.get("/v1/summary?appId=com.example.notes&containerId=iCloud.com.example.notes"))["devices"] as? Int == 4
            )
            #expect(try json(try await client.get("/v1/summary?appId=nobody"))["devices"] as? Int == 0)
        }
    }

    @Test("alerts list, filter by state and kind, and page")
    func alerts() async throws {
        let service = TestService()
        try await service.test { client in
            let urgent = #""kind": "activity", "phase": "export", "state": "failed", "error": {"domain": "CKErrorDomain", "code": 5}"#
            for i in 0..<3 {
                try await client.post(
                    batch(device: "d\(i)", [event("n", #""kind": "network", "available": true"#), event("f", "2026-11-22T10:00:01Z", urgent)])
                )
            }
            // d0 recovers: its syncError resolves.
            try await client.post(
                batch(device: "d0", [event("s", "2026-11-22T10:00:09Z", #""kind": "activity", "phase": "export", "state": "started""#)])
            )
            let all = try json(try await client.get("/v1/alerts"))
            let data = try #require(all["data"] as? [[String: Any]])
            #expect(data.count == 3)
            #expect(data.allSatisfy { $0["kind"] as? String == "syncError" })
            for field in ["id", "kind", "state", "deviceId", "appId", "containerId", "startsAt", "endsAt", "summary", "detail"] {
                #expect(data[0].keys.contains(field), "missing \(field)")
            }
            let firing = try #require(try json(try await client.get("/v1/alerts?state=firing"))["data"] as? [[String: Any]])
            #expect(firing.compactMap { $0["deviceId"] as? String }.sorted() == ["d1", "d2"])
            let resolved = try #require(try json(try await client.get("/v1/alerts?state=resolved&kind=syncError"))["data"] as? [[String: Any]])
            #expect(resolved.count == 1 && resolved[0]["deviceId"] as? String == "d0" && resolved[0]["endsAt"] is String)
            #expect(try json(try await client.get("/v1/alerts?kind=notSyncing"))["data"] as? [Any] != nil)
            let first = try json(try await client.get("/v1/alerts?limit=2"))
            let next = try #require(first["nextCursor"] as? String)
            let second = try json(try await client.get("/v1/alerts?limit=2&cursor=\(next)"))
            #expect((second["data"] as? [Any])?.count == 1)
            #expect(second["nextCursor"] is NSNull)
            #expect(try await client.get("/v1/alerts?state=open").status == .badRequest)
            #expect(try await client.get("/v1/alerts?kind=nope").status == .badRequest)
            let device = try json(try await client.get("/v1/devices/d1"))
            #expect((device["alerts"] as? [[String: Any]])?.first?["kind"] as? String == "syncError")
        }
    }

    @Test("reads need a read or admin key: none is 401, an ingest key is 403")
    func readScopes() async throws {
        let service = TestService()
        try await service.test { client in
            for uri in ["/v1/devices", "/v1/devices/x", "/v1/summary", "/v1/alerts"] {
                let none = try await client.get(uri, key: nil)
                let unknown = try await client.get(uri, key: "nope")
                let ingest = try await client.get(uri, key: ingestKey)
                let admin = try await client.get(uri, key: adminKey)
                #expect(none.status == .unauthorized, "\(uri)")
                #expect(unknown.status == .unauthorized, "\(uri)")
                #expect(ingest.status == .forbidden, "\(uri)")
                #expect(admin.status != .forbidden && admin.status != .unauthorized, "\(uri)")
            }
        }
    }
}

@Suite("Service endpoints")
struct ServiceEndpointTests {
    @Test(
        "on PostgreSQL, readyz passes only once the replica follows every replica's transitions",
        .enabled(if: PostgresTesting.baseURL != nil)
    )
    func readyOnceFollowing() async throws {
        let url = try await PostgresTesting.freshDatabase()
        let service = TestService(store: .shared(try PostgresStore(url: url, logger: testLogger())))
        try await service.app.test(.router) { client in
            // Asked as often as it can be: the engine is ready a poll of the follower's before it listens.
            var answers = 0
            while try await client.get("/readyz", key: nil).status != .ok {
                answers += 1
                try await Task.sleep(for: .milliseconds(1))
                try #require(answers < 20_000, "never ready")
            }
            #expect(service.engine.isReady)
            #expect(service.engine.feed.rebuilds > 0, "a stream opened now would be reset by the follower's first rebuild")
        }
    }

    @Test("livez, readyz, metrics and openapi.yaml answer without a key")
    func serviceEndpoints() async throws {
        let service = TestService()
        try await service.test { client in
            let live = try await client.get("/livez", key: nil)
            #expect(live.status == .ok)
            #expect(live.headers[.contentType] == "application/health+json")
            #expect(try json(live)["status"] as? String == "pass")
            // The body is encoded once and answered each time.
            #expect(try await client.get("/livez", key: nil).body == live.body)
            let ready = try await client.get("/readyz", key: nil)
            #expect(ready.status == .ok)
            #expect(try json(ready)["status"] as? String == "pass")
            #expect(try await client.get("/metrics", key: nil).status == .ok)
            let spec = try await client.get("/openapi.yaml", key: nil)
            #expect(spec.status == .ok)
            #expect(String(buffer: spec.body).hasPrefix("openapi: 3.1"))
            #expect(try await client.get("/nope", key: nil).status == .notFound)
        }
    }

    @Test("GET /openapi.yaml serves the top-level openapi.yaml byte for byte")
    func openapiMatchesFile() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let onDisk = try Data(contentsOf: root.appendingPathComponent("openapi.yaml"))
        try await TestService().test { client in
            let served = try await client.get("/openapi.yaml", key: nil)
            #expect(Data(buffer: served.body) == onDisk)
        }
    }
}
