import Foundation
import Hummingbird
import HummingbirdTesting
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthPostgres
import SyncHealthTestSupport
import Testing

@Suite("Deadlines on PostgreSQL: a stored deadline moves only earlier", .serialized, .enabled(if: PostgresTesting.baseURL != nil))
struct SharedDeadlineTests {
    @Test("a timer whose deadline moved later wakes at the earlier one, fires nothing, takes its exact deadline, and fires then")
    func earlyWake() async throws {
        var configuration = EngineConfiguration()
        configuration.alerts.errorAfter = .seconds(120)
        let store = try PostgresStore(url: try await PostgresTesting.freshDatabase(), logger: testLogger())
        let service = TestService(store: .shared(store), configuration: configuration)
        let failed = #""kind": "activity", "phase": "import", "state": "failed", "error": {"domain": "CKErrorDomain", "code": 4}"#
        try await service.test { client in
            try await client.post(batch([event("n", #""kind": "network", "available": true"#), event("f1", "2026-11-22T10:00:00Z", failed)]))
            #expect(try await store.nextDeviceDeadline() == testStart + .seconds(120))
            // The error clears, and comes back a minute later: its 120 s start again.
            try await service.clock.advanceAndSettle(by: .seconds(60))
            try await client.post(batch([event("s", "2026-11-22T10:01:00Z", #""kind": "activity", "phase": "import", "state": "succeeded""#)]))
            try await client.post(batch([event("f2", "2026-11-22T10:01:00.5Z", failed)]))
            #expect(try await store.nextDeviceDeadline() == testStart + .seconds(120), "the stored deadline stays the earlier one")

            try await service.clock.advanceAndSettle(by: .seconds(60))
            #expect(try await firing(client, kind: .syncError).isEmpty, "the early wake fires nothing")
            #expect(try await eventually { try await store.nextDeviceDeadline() == testStart + .seconds(180) }, "and writes the exact deadline")

            try await service.clock.advanceAndSettle(by: .seconds(60))
            #expect(try await eventually { try await !firing(client, kind: .syncError).isEmpty })
            #expect(try await firing(client, kind: .syncError).first?["startsAt"] as? String == (testStart + .seconds(180)).rfc3339)
        }
    }
}
