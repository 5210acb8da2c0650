import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncHealthCore
import SyncHealthEngine
@_spi(Testing) import SyncHealthPostgres
import SyncHealthTestSupport
import Testing

@Suite("Reads without fan-out on PostgreSQL", .serialized, .enabled(if: PostgresTesting.baseURL != nil))
struct ReadQueryCountTests {
    @Test("GET /v1/alerts?limit=1000 takes the same two queries as a page of 10, with 1,000 firing alerts and a silence")
    func alertsPageQueries() async throws {
        let store = try PostgresStore(url: try await PostgresTesting.freshDatabase(), logger: testLogger())
        let service = TestService(store: .shared(store))
        try await service.test { client in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        for i in stride(from: worker, to: 1000, by: 8) {
                            let events = [event("n", #""kind": "network", "available": true"#), event("f", "2026-11-22T10:00:01Z", urgentError)]
                            let response = try await client.post(batch(device: "d\(i)", events))
                            #expect(response.status == .accepted)
                        }
                    }
                }
                try await group.waitForAll()
            }
            // A silence that matches on the platform, which only the device knows: the page must read the devices.
            let silence = try await client.execute(
                uri: "/v1/silences",
                method: .post,
                headers: headers(adminKey),
                body: ByteBuffer(string: #"{"matchers": {"platform": "iOS"}, "endsAt": "2099-01-01T00:00:00Z", "comment": "t"}"#)
            )
            #expect(silence.status == .created)

            // Counted on the request's own task (`PostgresStore.tally`): the services beside the engine (the key
            // directory every 500 ms, the watches, the transition follower) query the same store meanwhile.
            func queries(_ path: String) async throws -> (Int, [[String: Any]]) {
                let tally = QueryTally()
                let body = try await PostgresStore.tally.withValue(tally) { try json(try await client.get(path)) }
                return (tally.queries, body["data"] as? [[String: Any]] ?? [])
            }
            let (big, page) = try await queries("/v1/alerts?state=firing&limit=1000")
            #expect(page.count == 1000)
            let devices = page.filter { $0["deviceId"] is String }
            #expect(devices.count >= 999, "the container's fleet alert aside")
            #expect(devices.allSatisfy { ($0["silencedBy"] as? [String])?.count == 1 }, "every device matched through its platform")
            let (small, _) = try await queries("/v1/alerts?state=firing&limit=10")
            #expect(small >= 1, "the tally counts the request's queries")
            #expect(big == small, "the same queries whatever the page's size")
            #expect(big <= 2, "the alerts, then their devices in one read (\(big) queries)")
        }
    }
}
