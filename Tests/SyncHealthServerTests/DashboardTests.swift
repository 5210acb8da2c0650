import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import NIOFoundationEssentialsCompat
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthPostgres
import SyncHealthSQLite
import SyncHealthStore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthServer

@Suite("The dashboard's assets")
struct DashboardAssetTests {
    /// URLs that are not fetched: the SVG namespace (an identifier), loopback, and the reserved example domains.
    static func externalURLs(in text: String) -> [String] {
        let pattern = #/https?://[^\s"'`)<>]+/#
        return text.matches(of: pattern).map { String($0.output) }.filter { url in
            !(url.hasPrefix("http://www.w3.org/2000/svg") || url.hasPrefix("http://127.0.0.1") || url.hasPrefix("http://localhost")
                || url.contains("example.com") || url.contains("example.org"))
        }
    }

    @Test("every asset is served with a strict Content-Security-Policy, and nothing served names an external URL")
    func assetsAreSelfContained() async throws {
        let service = TestService()
        try await service.test { client in
            var paths = DashboardRoutes.assets.map(\.path)
            paths.append("/openapi.yaml")
            for path in paths {
                let response = try await client.get(path, key: nil)
                #expect(response.status == .ok, "\(path)")
                let text = String(buffer: response.body)
                #expect(!text.isEmpty)
                #expect(Self.externalURLs(in: text) == [], "\(path)")
                if path != "/openapi.yaml" {
                    let csp = response.headers[.contentSecurityPolicy] ?? ""
                    #expect(csp.contains("default-src 'none'"), "\(path)")
                    #expect(csp.contains("script-src 'self'") && csp.contains("style-src 'self'") && csp.contains("connect-src 'self'"))
                    #expect(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"))
                }
            }
            // The page loads its script and style from this server only, and has no inline script or style.
            let page = String(buffer: try await client.get("/", key: nil).body)
            for reference in page.matches(of: #/(?:src|href)="([^"]*)"/#).map({ String($0.output.1) }) {
                #expect(reference.hasPrefix("/") || reference.hasPrefix("#"), "\(reference)")
            }
            #expect(page.matches(of: #/<script(?![^>]*\bsrc=)[^>]*>/#).isEmpty, "an inline script")
            #expect(!page.contains("<style") && !page.contains("style=\""), "an inline style")
            // Other methods on the page are refused like any API path.
            #expect(try await client.execute(uri: "/", method: .post, headers: [:]).status == .methodNotAllowed)
        }
    }

    @Test("the page's summary labels and colours are CloudKitSyncMonitor's, as the API gives them")
    func summaryTableMatches() throws {
        let script = String(decoding: PackageResources.dashboard_js, as: UTF8.self)
        for summary in SyncStateSummary.allCases {
            let line = #"  \#(summary.rawValue): ["\#(summary.description)", "\#(summary.symbolColor)","#
            #expect(script.contains(line), "\(summary.rawValue)")
        }
        for cls in ErrorClass.allCases { #expect(script.contains("  \(cls.rawValue): \""), "\(cls.rawValue)") }
        for kind in AlertKind.allCases { #expect(script.contains("  \(kind.rawValue): \""), "\(kind.rawValue)") }
        #expect(script.contains(#"const KEY_NAME = "synchealth.apiKey";"#))
    }
}

@Suite("Fleet scopes, history and per-app series")
struct FleetHistoryTests {
    static func post(_ client: some TestClientProtocol, device: String, app: String, container: String?, broken: Bool) async throws {
        let events = broken ? [event("n", #""kind": "network", "available": true"#), event("f", "2026-11-22T10:00:01Z", urgentError)] : healthyEvents
        let response = try await client.post(batch(device: device, app: app, container: container, events))
        #expect(response.status == .accepted)
    }

    @Test("scopes list every app and container with devices, largest first, with their counters")
    func scopes() async throws {
        let service = TestService()
        try await service.test { client in
            try await Self.post(client, device: "a", app: "app.one", container: "iCloud.one", broken: true)
            try await Self.post(client, device: "b", app: "app.one", container: "iCloud.one", broken: false)
            try await Self.post(client, device: "c", app: "app.two", container: nil, broken: false)
            let body = try json(try await client.get("/v1/summary/scopes"))
            let data = try #require(body["data"] as? [[String: Any]])
            let scopes = data.map { "\($0["appId"] as? String ?? "*")/\($0["containerId"] as? String ?? "*")=\($0["devices"] as? Int ?? -1)" }
            #expect(scopes == ["*/iCloud.one=2", "app.one/*=2", "app.one/iCloud.one=2", "app.two/*=1"])
            #expect(body["total"] as? Int == 4)
            #expect(data[0]["broken"] as? Int == 1)
            #expect(try await client.get("/v1/summary/scopes", key: ingestKey).status == .forbidden)
            #expect(try await client.get("/v1/summary/scopes?limit=1").status == .ok)
            #expect(try await client.get("/v1/summary/scopes?limit=0").status == .badRequest)
        }
    }

    @Test("history answers the recorded points of a scope, picks hours beyond 48 h, and refuses bad ranges")
    func historyEndpoint() async throws {
        let service = TestService()
        try await service.test { client in
            try await Self.post(client, device: "a", app: "app.one", container: "iCloud.one", broken: true)
            let recorder = HistoryRecorder(engine: service.engine, store: service.store, logger: testLogger())
            try await recorder.sample(at: service.clock.now)
            // The service's own recorder samples too when the clock crosses a minute; a slot keeps its first point,
            // so the second device is posted before the clock moves.
            try await Self.post(client, device: "b", app: "app.one", container: "iCloud.one", broken: false)
            service.clock.advance(by: .seconds(60))
            try await recorder.sample(at: service.clock.now)

            let all = try json(try await client.get("/v1/summary/history"))
            #expect(all["resolution"] as? String == "minute")
            let points = try #require(all["points"] as? [[String: Any]])
            #expect(points.map { $0["devices"] as? Int } == [1, 2])
            #expect(points.map { $0["broken"] as? Int } == [1, 1])
            #expect(points.first?["at"] as? String == HistoryResolution.minute.slot(testStart).rfc3339)

            let scoped = try json(try await client.get("/v1/summary/history?appId=app.one&containerId=iCloud.one"))
            #expect((scoped["points"] as? [Any])?.count == 2)
            #expect(scoped["appId"] as? String == "app.one")
            let other = try json(try await client.get("/v1/summary/history?appId=app.two"))
            #expect((other["points"] as? [Any])?.count == 0)

            let hours = try json(try await client.get("/v1/summary/history?from=2026-11-01T00:00:00Z"))
            #expect(hours["resolution"] as? String == "hour")
            #expect((hours["points"] as? [[String: Any]])?.map { $0["devices"] as? Int } == [1], "the first sample of the hour is the hour's point")

            #expect(try await client.get("/v1/summary/history?from=yesterday").status == .badRequest)
            #expect(try await client.get("/v1/summary/history?from=2026-11-23T00:00:00Z&to=2026-11-22T00:00:00Z").status == .badRequest)
            #expect(try await client.get("/v1/summary/history?resolution=second").status == .badRequest)
        }
    }

    @Test("history survives a restart", arguments: [EngineStore.sqlite, .postgres].filter { EngineStore.withShared.contains($0) })
    func historySurvivesRestart(kind: EngineStore) async throws {
        let directory = temporaryDirectory()
        let url = kind == .postgres ? try await PostgresTesting.freshDatabase() : nil
        func open() throws -> MonitorStore {
            if let url { return .shared(try PostgresStore(url: url, logger: testLogger())) }
            return .local(try SQLiteStore(directory: directory, synchronous: .normal))
        }
        let first = TestService(store: try open())
        try await first.test { client in
            try await Self.post(client, device: "a", app: "app.one", container: "iCloud.one", broken: true)
            try await HistoryRecorder(engine: first.engine, store: first.store, logger: testLogger()).sample(at: first.clock.now)
        }
        let second = TestService(store: try open())
        try await second.test { client in
            let points = try #require(try json(try await client.get("/v1/summary/history"))["points"] as? [[String: Any]])
            #expect(points.map { $0["broken"] as? Int } == [1])
        }
    }

    @Test("the recorder keeps the whole fleet and the largest scopes only")
    func recorderCapsScopes() async throws {
        let service = TestService()
        try await service.test { client in
            for i in 0..<5 { try await Self.post(client, device: "d\(i)", app: "app.\(i)", container: nil, broken: false) }
            try await Self.post(client, device: "x", app: "app.0", container: nil, broken: false)
            try await HistoryRecorder(engine: service.engine, store: service.store, maxScopes: 2, logger: testLogger()).sample(at: service.clock.now)
            let minute = HistoryResolution.minute.slot(service.clock.now)
            #expect(try await service.store.history(.all, resolution: .minute, from: minute, to: minute).count == 1)
            #expect(try await service.store.history(FleetScope(appId: "app.0"), resolution: .minute, from: minute, to: minute).count == 1)
            #expect(try await service.store.history(FleetScope(appId: "app.1"), resolution: .minute, from: minute, to: minute).isEmpty)
        }
    }

    @Test("device lists filter by platform, OS and app version")
    func deviceFilters() async throws {
        let service = TestService()
        try await service.test { client in
            for (device, version) in [("a", "1.0"), ("b", "2.0"), ("c", "2.0")] {
                let body =
                    #"{"device": {"deviceId": "\#(device)", "appId": "app.one", "platform": "iOS", "osVersion": "18.1", "appVersion": "\#(version)"}, "events": [\#(healthyEvents.joined(separator: ","))]}"#
                #expect(try await client.post(ByteBuffer(string: body)).status == .accepted)
            }
            func ids(_ query: String) async throws -> [String] {
                try #require(try json(try await client.get("/v1/devices?\(query)"))["data"] as? [[String: Any]]).compactMap {
                    $0["deviceId"] as? String
                }
            }
            #expect(try await ids("appVersion=2.0") == ["b", "c"])
            #expect(try await ids("platform=iOS&osVersion=18.1&appVersion=1.0") == ["a"])
            #expect(try await ids("platform=macOS") == [])
            let page = try json(try await client.get("/v1/devices?appVersion=2.0&limit=1"))
            #expect((page["data"] as? [[String: Any]])?.first?["deviceId"] as? String == "b")
            let cursor = try #require(page["nextCursor"] as? String)
            #expect(try await ids("appVersion=2.0&limit=1&cursor=\(cursor)") == ["c"])
        }
    }

    @Test("errors carry their CloudKit name and advice: who acts and what to do")
    func errorNames() async throws {
        let service = TestService()
        try await service.test { client in
            try await Self.post(client, device: "a", app: "app.one", container: nil, broken: true)
            let device = try json(try await client.get("/v1/devices/a?appId=app.one"))
            let error = try #require(device["exportError"] as? [String: Any])
            #expect(error["name"] as? String == "badContainer")
            let advice = try #require(error["advice"] as? [String: Any])
            #expect(advice["who"] as? String == "developer")
            #expect((advice["text"] as? String)?.contains("CloudKit Console") == true)
        }
    }

    @Test("/metrics has per-app series that add up to the fleet, capped, with the rest under app_id=\"other\"")
    func perAppSeries() async throws {
        var all: [FleetScope: FleetCounts] = [:]
        func add(_ app: String, _ container: String?, devices: Int, broken: Int) {
            var c = FleetCounts()
            c.devices = devices
            c.broken = broken
            c.bySummaryCounts[SyncStateSummary.allCases.firstIndex(of: .error) ?? 0] = broken
            for scope in FleetScope.scopes(appId: app, containerId: container) { all[scope, default: FleetCounts()].add(c) }
        }
        add("big", "iCloud.big", devices: 10, broken: 2)
        add("big", nil, devices: 3, broken: 1)
        add("small", "iCloud.s\"q", devices: 1, broken: 1)
        add("tiny", "iCloud.t", devices: 1, broken: 0)
        var out: [UInt8] = []
        FleetMetrics.write(all, maxLabelSets: 2, into: &out)
        let text = String(decoding: out, as: UTF8.self)
        #expect(text.contains(#"synchealth_fleet_broken_devices{app_id="big",container_id="iCloud.big"} 2"#))
        #expect(text.contains(#"synchealth_fleet_broken_devices{app_id="big",container_id=""} 1"#))
        #expect(text.contains(#"synchealth_fleet_broken_devices{app_id="other",container_id="other"} 1"#))
        #expect(!text.contains("small"), "over the cap")
        #expect(text.contains(#"synchealth_fleet_devices{app_id="big",container_id="iCloud.big",summary="error"} 2"#))
        var total = 0
        for line in text.split(separator: "\n") where line.hasPrefix("synchealth_fleet_broken_devices{") {
            total += Int(line.split(separator: " ").last ?? "") ?? 0
        }
        #expect(total == 4, "every device once")
        #expect(FleetMetrics.escape("a\"b\\c\nd") == #"a\"b\\c\nd"#)

        let service = TestService()
        try await service.test { client in
            try await Self.post(client, device: "a", app: "app.one", container: "iCloud.one", broken: true)
            let metrics = String(buffer: try await client.get("/metrics", key: nil).body)
            #expect(metrics.contains(#"synchealth_fleet_broken_devices{app_id="app.one",container_id="iCloud.one"} 1"#))
            #expect(metrics.contains("# TYPE synchealth_fleet_devices gauge"))
        }
    }
}
