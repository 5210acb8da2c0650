import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncHealthCore
import SyncHealthEngineTesting
import SyncHealthPostgres
import SyncHealthStore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthEngine
@testable import SyncHealthServer

@Suite("The releaseRegression alert")
struct RegressionAlertTests {
    /// A device on `version` that recovers from `ReleaseEndpointTests.post`'s error.
    static func recover(_ client: some TestClientProtocol, _ device: String, version: String) async throws {
        let events = [event("s", "2026-11-22T10:00:05Z", #""kind": "activity", "phase": "export", "state": "started""#)]
        let body =
            #"{"device": {"deviceId": "\#(device)", "appId": "com.example.notes", "containerId": "iCloud.n", "platform": "iOS", "osVersion": "18.1", "appVersion": "\#(version)"}, "events": [\#(events.joined(separator: ","))]}"#
        #expect(try await client.post(ByteBuffer(string: body)).status == .accepted)
    }

    static var configuration: EngineConfiguration {
        var configuration = EngineConfiguration()
        configuration.releaseCheckInterval = .seconds(1)
        return configuration
    }

    @Test(
        "2.0 broken on 60 of 100 against 1.9 on 2 of 100 fires one releaseRegression for 2.0, told to device and incident subscriptions; it resolves when 2.0 recovers",
        arguments: EngineStore.withShared
    )
    func firesAndResolves(store: EngineStore) async throws {
        let transport = RecordingTransport()
        let clock = ManualClock(testStart)
        let service = TestService(
            store: try await store.make(),
            clock: clock,
            configuration: Self.configuration,
            transport: transport,
            webhooks: .privateAllowed
        )
        try await service.test { client in
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/standard", "kinds": ["releaseRegression"]}"#)
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/slack", "format": "slack", "kinds": ["releaseRegression"]}"#)
            for i in 0..<100 { try await ReleaseEndpointTests.post(client, "old-\(i)", version: "1.9", broken: i < 2) }
            for i in 0..<100 { try await ReleaseEndpointTests.post(client, "new-\(i)", version: "2.0", broken: i < 60) }
            try await clock.advanceAndSettle(by: .seconds(61))
            #expect(try await eventually { transport.requests(to: "/standard").count == 1 && transport.requests(to: "/slack").count == 1 })
            let fired = try #require(transport.requests(to: "/standard").first?.json as? [String: Any])
            #expect(fired["type"] as? String == "alert.firing")
            let alert = try #require(fired["data"] as? [String: Any])
            #expect(alert["kind"] as? String == "releaseRegression")
            #expect(alert["appVersion"] as? String == "2.0")
            #expect(alert["appId"] as? String == "com.example.notes")
            #expect((alert["summary"] as? String)?.contains("60% of its active devices, against 2% on 1.9") == true, "\(alert)")
            let slack = (transport.requests(to: "/slack").first?.json as? [String: Any])?["text"] as? String ?? ""
            #expect(slack.contains("releaseRegression firing") && slack.contains("Release 2.0"), "a Slack subscription hears of it: \(slack)")

            let listed = try json(try await client.get("/v1/alerts?kind=releaseRegression&state=firing"))
            let rows = try #require(listed["data"] as? [[String: Any]])
            #expect(rows.count == 1 && rows.first?["appVersion"] as? String == "2.0")

            for i in 0..<60 { try await Self.recover(client, "new-\(i)", version: "2.0") }
            try await clock.advanceAndSettle(by: .seconds(61))
            #expect(try await eventually { transport.requests(to: "/standard").count == 2 })
            let resolved = try #require(transport.requests(to: "/standard").last?.json as? [String: Any])
            #expect(resolved["type"] as? String == "alert.resolved")
            #expect((resolved["data"] as? [String: Any])?["id"] as? String == alert["id"] as? String, "the same alert resolves")
            try await clock.advanceAndSettle(by: .seconds(5))
            #expect(transport.requests(to: "/standard").count == 2, "told once each way")
        }
    }

    @Test("equal shares fire nothing, nor do fewer active devices than the minimum; a regression fires once however often it is judged")
    func judgedOnlyWhenItHolds() async throws {
        var configuration = Self.configuration
        configuration.alerts.releaseMinimumDevices = 30
        let service = TestService(configuration: configuration)
        let watch = RegressionWatch(engine: service.engine, delivery: service.delivery, logger: testLogger())
        try await service.test { client in
            for i in 0..<40 { try await ReleaseEndpointTests.post(client, "a-\(i)", version: "1.0", broken: i < 10) }
            for i in 0..<40 { try await ReleaseEndpointTests.post(client, "b-\(i)", version: "1.1", broken: i < 10) }
            for i in 0..<29 { try await ReleaseEndpointTests.post(client, "c-\(i)", version: "1.2", broken: true) }
            #expect(try await watch.step() == [], "1.1 equals 1.0; 1.2 has 29 active devices, fewer than 30")
            try await ReleaseEndpointTests.post(client, "c-29", version: "1.2", broken: true)
            let fired = try #require(try await watch.step())
            #expect(fired.map(\.appVersion) == ["1.2"] && fired.map(\.state) == [.firing], "30 devices: judged, and a regression")
            #expect(try await watch.step() == [], "firing already")
        }
    }

    @Test("a silence on the app version holds the regression's messages; when it ends, the regression is told, then its resolve")
    func silencedByVersion() async throws {
        let transport = RecordingTransport()
        let service = TestService(configuration: Self.configuration, transport: transport, webhooks: .privateAllowed)
        let watch = RegressionWatch(engine: service.engine, delivery: service.delivery, logger: testLogger())
        try await service.test { client in
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/standard"}"#)
            let created = try await createSilence(
                client,
                #"{"matchers": {"appVersion": "2.0"}, "endsAt": "2030-01-01T00:00:00Z", "comment": "rolling back"}"#
            )
            for i in 0..<100 { try await ReleaseEndpointTests.post(client, "old-\(i)", version: "1.9", broken: i < 2) }
            for i in 0..<100 { try await ReleaseEndpointTests.post(client, "new-\(i)", version: "2.0", broken: i < 60) }
            let before = transport.requests(to: "/standard").count
            service.clock.advance(by: .seconds(1))
            // The same second wakes the service's own watch (its interval is 1 s): this step or that one fires it.
            _ = try await watch.step()
            func firing() async throws -> Int {
                let listed = try json(try await client.get("/v1/alerts?kind=releaseRegression&state=firing"))
                return (listed["data"] as? [Any])?.count ?? 0
            }
            #expect(try await eventually { try await firing() == 1 }, "it fires, and is listed")
            #expect(transport.requests(to: "/standard").count == before, "but nothing about it is sent")

            // The silence ends while the release still fails: its alert is told then, once, and its resolve later.
            func regressions() -> [String?] {
                transport.requests(to: "/standard").compactMap { $0.json as? [String: Any] }
                    .filter { ($0["data"] as? [String: Any])?["kind"] as? String == "releaseRegression" }.map { $0["type"] as? String }
            }
            let silence = try #require(created["id"] as? String)
            service.clock.advance(by: .seconds(1))
            #expect(try await client.execute(uri: "/v1/silences/\(silence)", method: .delete, headers: headers(adminKey)).status == .ok)
            #expect(try await eventually { regressions() == ["alert.firing"] })
            for i in 0..<60 { try await Self.recover(client, "new-\(i)", version: "2.0") }
            _ = try await watch.step()
            #expect(try await eventually { try await firing() == 0 }, "it resolves")
            #expect(try await eventually { regressions() == ["alert.firing", "alert.resolved"] }, "told once each way")
        }
    }
}

extension RegressionAlertTests {
    @Test(
        "a release whose alert fires a fourth time within the flap window is told once as flapping, held firing while it crosses the line, and resolved once quiet"
    )
    func flapping() async throws {
        let transport = RecordingTransport()
        var configuration = Self.configuration
        configuration.releaseCheckInterval = .seconds(86_400)  // the test judges; the service's own watch sleeps
        configuration.alerts.releaseMinimumDevices = 10
        configuration.notifications.flapWindow = .seconds(60)
        let clock = ManualClock(testStart)
        let service = TestService(clock: clock, configuration: configuration, transport: transport, webhooks: .privateAllowed)
        let watch = RegressionWatch(engine: service.engine, delivery: service.delivery, logger: testLogger())
        try await service.test { client in
            _ = try await createWebhook(client, json: #"{"url": "http://127.0.0.1:9/standard", "kinds": ["releaseRegression"]}"#)
            // Once ready, the service's own watch judges once (nothing yet) and sleeps for a day.
            try await waitUntilReady(service.engine)
            try await clock.advanceAndSettle(by: .seconds(1))
            for i in 0..<60 { try await ReleaseEndpointTests.post(client, "old-\(i)", version: "1.9", broken: false) }
            func judge(after seconds: Int64 = 1) async throws -> [AlertRecord] {
                clock.advance(by: .seconds(seconds))
                return try #require(try await watch.step())
            }
            func breakAndRecover(_ batch: String) async throws -> (fired: [AlertRecord], resolved: [AlertRecord]) {
                for i in 0..<10 { try await ReleaseEndpointTests.post(client, "\(batch)-\(i)", version: "2.0", broken: true) }
                let fired = try await judge()
                for i in 0..<10 { try await Self.recover(client, "\(batch)-\(i)", version: "2.0") }
                return (fired, try await judge())
            }
            for cycle in 0..<3 {
                let (fired, resolved) = try await breakAndRecover("c\(cycle)")
                #expect(fired.map(\.state) == [.firing] && resolved.map(\.state) == [.resolved], "cycle \(cycle)")
                #expect(fired.first?.detail.contains("Flapping") == false, "three fires in the window are not flapping")
            }
            let (fired, held) = try await breakAndRecover("c3")
            #expect(fired.first?.detail.contains("Flapping") == true, "the fourth fire says so: \(fired.first?.detail ?? "")")
            #expect(held.isEmpty, "a flapping alert stays firing when its release recovers")
            let quietSince = clock.now

            let (again, stillHeld) = try await breakAndRecover("c4")
            #expect(again.isEmpty && stillHeld.isEmpty, "crossing the line again while held fires nothing new")
            let quietAgain = clock.now
            #expect(quietAgain > quietSince)
            #expect(try await judge(after: 59) == [], "quiet for less than the window")
            let resolved = try await judge()
            #expect(resolved.map(\.state) == [.resolved] && resolved.first?.id == fired.first?.id)
            #expect(resolved.first?.endsAt == quietAgain, "resolved as of when it went quiet")
            #expect(
                try await eventually { transport.requests(to: "/standard").count == 8 },
                "3 fire/resolve pairs, the flapping fire and its resolve"
            )
        }
    }
}

@Suite("The releaseRegression alert on two PostgreSQL replicas", .serialized, .enabled(if: PostgresTesting.baseURL != nil))
struct SharedRegressionAlertTests {
    @Test("two replicas judging the same regression at once write one alert and one message")
    func onceAcrossReplicas() async throws {
        let url = try await PostgresTesting.freshDatabase()
        let transport = RecordingTransport()
        func replica() throws -> TestService {
            TestService(
                store: .shared(try PostgresStore(url: url, logger: testLogger())),
                configuration: RegressionAlertTests.configuration,
                transport: transport,
                webhooks: .privateAllowed
            )
        }
        let (a, b) = (try replica(), try replica())
        try await a.test { clientA in
            try await b.test { clientB in
                _ = try await createWebhook(clientA, json: #"{"url": "http://127.0.0.1:9/standard", "kinds": ["releaseRegression"]}"#)
                for i in 0..<100 { try await ReleaseEndpointTests.post(clientA, "old-\(i)", version: "1.9", broken: i < 2) }
                for i in 0..<100 { try await ReleaseEndpointTests.post(clientB, "new-\(i)", version: "2.0", broken: i < 60) }
                let (watchA, watchB) = (
                    RegressionWatch(engine: a.engine, delivery: a.delivery, logger: testLogger()),
                    RegressionWatch(engine: b.engine, delivery: b.delivery, logger: testLogger())
                )
                async let stepA = watchA.step()
                async let stepB = watchB.step()
                let written = [try await stepA, try await stepB].map { $0?.count ?? 0 }
                #expect(written.sorted() == [0, 1], "one replica wrote it; the other found it firing or was refused")
                let firing = try json(try await clientB.get("/v1/alerts?kind=releaseRegression&state=firing"))
                #expect((firing["data"] as? [Any])?.count == 1)
                #expect(try await eventually { transport.requests(to: "/standard").count == 1 })
                let (againA, againB) = (try await watchA.step(), try await watchB.step())
                #expect(againA == [] && againB == [], "both see it firing")
            }
        }
    }
}
