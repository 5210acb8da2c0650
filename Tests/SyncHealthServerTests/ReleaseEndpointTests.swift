import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncHealthCore
import SyncHealthEngine
import SyncHealthTestSupport
import Testing

@testable import SyncHealthServer

@Suite("Release health: GET /v1/releases")
struct ReleaseEndpointTests {
    /// Posts one device of `app` on `version` (OS `os`), broken with `badContainer` or healthy.
    static func post(_ client: some TestClientProtocol, _ device: String, version: String?, os: String = "18.1", broken: Bool) async throws {
        let events = broken ? [event("n", #""kind": "network", "available": true"#), event("f", "2026-11-22T10:00:01Z", urgentError)] : healthyEvents
        let versionField = version.map { #", "appVersion": "\#($0)""# } ?? ""
        let body =
            #"{"device": {"deviceId": "\#(device)", "appId": "com.example.notes", "containerId": "iCloud.n", "platform": "iOS", "osVersion": "\#(os)"\#(versionField)}, "events": [\#(events.joined(separator: ","))]}"#
        let response = try await client.post(ByteBuffer(string: body))
        #expect(response.status == .accepted)
    }

    @Test(
        "2.0 broken on 60 of 100 devices against 1.9 on 2 of 100: counts, top error with advice, and the regression",
        arguments: EngineStore.withShared
    )
    func regression(store: EngineStore) async throws {
        let service = TestService(store: try await store.make())
        try await service.test { client in
            for i in 0..<100 { try await Self.post(client, "old-\(i)", version: "1.9", os: "17.5", broken: i < 2) }
            for i in 0..<100 { try await Self.post(client, "new-\(i)", version: "2.0", broken: i < 60) }
            try await Self.post(client, "unnamed", version: nil, broken: false)

            let body = try json(try await client.get("/v1/releases?appId=com.example.notes"))
            #expect(body["by"] as? String == "appVersion")
            #expect(body["minimumDevices"] as? Int == 50)
            let data = try #require(body["data"] as? [[String: Any]])
            #expect(data.map { $0["version"] as? String } == ["2.0", "1.9", nil], "newest first, the unnamed release last")
            let new = data[0]
            #expect(new["devices"] as? Int == 100)
            #expect(new["active"] as? Int == 100)
            #expect(new["broken"] as? Int == 60)
            #expect(new["brokenShare"] as? Double == 0.6)
            #expect((new["bySummary"] as? [String: Int])?["error"] == 60)
            let top = try #require((new["topErrors"] as? [[String: Any]])?.first)
            #expect(top["name"] as? String == "badContainer")
            #expect(top["devices"] as? Int == 60)
            #expect((top["advice"] as? [String: Any])?["who"] as? String == "developer")
            #expect(new["firstSeenAt"] is String && new["lastSeenAt"] is String)
            let regression = try #require(new["regression"] as? [String: Any])
            #expect(regression["previous"] as? String == "1.9")
            #expect(regression["previousShare"] as? Double == 0.02)
            #expect((regression["z"] as? Double ?? 0) > 3.09)
            #expect(data[1]["regression"] is NSNull, "1.9 has nothing older to be compared with")
            #expect(data[1]["broken"] as? Int == 2)

            let byOS = try json(try await client.get("/v1/releases?appId=com.example.notes&by=osVersion"))
            let os = try #require(byOS["data"] as? [[String: Any]])
            #expect(os.map { $0["version"] as? String } == ["18.1", "17.5"])
            #expect(os.map { $0["devices"] as? Int } == [101, 100])
            #expect(os.allSatisfy { $0["regression"] is NSNull }, "OS versions are not the app's releases: never judged")
        }
    }

    @Test("equal shares give no regression, nor do fewer active devices than the minimum")
    func noRegression() async throws {
        var configuration = EngineConfiguration()
        configuration.alerts.releaseMinimumDevices = 30
        let service = TestService(configuration: configuration)
        try await service.test { client in
            for i in 0..<40 { try await Self.post(client, "a-\(i)", version: "1.0", broken: i < 10) }
            for i in 0..<40 { try await Self.post(client, "b-\(i)", version: "1.1", broken: i < 10) }
            for i in 0..<29 { try await Self.post(client, "c-\(i)", version: "1.2", broken: true) }
            let data = try #require(try json(try await client.get("/v1/releases?appId=com.example.notes"))["data"] as? [[String: Any]])
            #expect(data.map { $0["version"] as? String } == ["1.2", "1.1", "1.0"])
            #expect(data.allSatisfy { $0["regression"] is NSNull }, "1.1 equals 1.0; 1.2 has 29 active devices, fewer than 30")
            #expect(data[0]["minimumDevices"] == nil)
        }
    }

    @Test("appId is required, by must be appVersion or osVersion, and a read key is needed")
    func badQueries() async throws {
        let service = TestService()
        try await service.test { client in
            #expect(try await client.get("/v1/releases").status == .badRequest)
            #expect(try await client.get("/v1/releases?appId=com.example.notes&by=platform").status == .badRequest)
            #expect(try await client.get("/v1/releases?appId=com.example.notes", key: ingestKey).status == .forbidden)
            let empty = try json(try await client.get("/v1/releases?appId=com.example.unknown"))
            #expect((empty["data"] as? [Any])?.isEmpty == true)
        }
    }
}

@Suite("Release health: /metrics")
struct ReleaseMetricsTests {
    @Test("/metrics has per-version series and the regression flag, capped to the largest versions with the rest as other")
    func series() async throws {
        let service = TestService()
        try await service.test { client in
            for i in 0..<60 { try await ReleaseEndpointTests.post(client, "old-\(i)", version: "1.9", broken: i < 1) }
            for i in 0..<60 { try await ReleaseEndpointTests.post(client, "new-\(i)", version: "2.0", broken: i < 40) }
            let metrics = String(buffer: try await client.get("/metrics", key: nil).body)
            #expect(metrics.contains(#"synchealth_release_devices{app_id="com.example.notes",app_version="2.0",summary="error"} 40"#))
            #expect(metrics.contains(#"synchealth_release_devices{app_id="com.example.notes",app_version="1.9",summary="succeeded"} 59"#))
            #expect(metrics.contains(#"synchealth_release_regression{app_id="com.example.notes",app_version="2.0"} 1"#))
            #expect(metrics.contains(#"synchealth_release_regression{app_id="com.example.notes",app_version="1.9"} 0"#))
        }

        var small = ReleaseCounts()
        small.counts.devices = 1
        var big = ReleaseCounts()
        big.counts.devices = 5
        var out: [UInt8] = []
        ReleaseMetrics.write(["a": ["1": big, "2": small], "b": ["9": small]], minimumDevices: 50, maxLabelSets: 1, into: &out)
        let text = String(decoding: out, as: UTF8.self)
        #expect(text.contains(#"synchealth_release_devices{app_id="a",app_version="1",summary="error"} 0"#))
        #expect(!text.contains(#"app_version="2""#) && !text.contains(#"app_id="b""#), "over the cap")
        #expect(text.contains(#"app_id="other",app_version="other""#))
        #expect(!text.contains(#"synchealth_release_regression{app_id="other""#))
    }
}
