import Foundation
import GRDB
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncHealthEngine
import SyncHealthSQLite
import SyncHealthServer
import SyncHealthStore
import SyncHealthTestSupport
import Testing

@Suite("GET /v1/backup")
struct BackupEndpointTests {
    @Test("the embedded store answers a SQLite file holding every device acknowledged before, and leaves no copy behind")
    func backupOfTheEmbeddedStore() async throws {
        let directory = temporaryDirectory()
        let service = TestService(store: .local(try SQLiteStore(directory: directory, synchronous: .normal)))
        try await service.test { client in
            try await client.post(batch(notSyncingEvents))
            let response = try await client.get("/v1/backup", key: adminKey)
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "application/vnd.sqlite3")
            let file = (temporaryDirectory() as NSString).appendingPathComponent("backup.sqlite")
            try Data(response.body.readableBytesView).write(to: URL(fileURLWithPath: file))
            let contents = try SQLiteStore.checkBackup(at: file)
            #expect(contents.devices == 1, "the device posted just before, though no fold had run")
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("synchealth-backup-") }
            #expect(leftovers.isEmpty)
        }
    }

    @Test("an ingest or read key gets 403, no key 401")
    func adminOnly() async throws {
        let service = TestService(store: .local(try SQLiteStore(directory: temporaryDirectory(), synchronous: .normal)))
        try await service.test { client in
            let ingest = try await client.get("/v1/backup", key: ingestKey)
            let read = try await client.get("/v1/backup", key: readKey)
            let none = try await client.get("/v1/backup", key: nil)
            #expect(ingest.status == .forbidden && read.status == .forbidden && none.status == .unauthorized)
        }
    }

    @Test("a store that does not back itself up (PostgreSQL) answers 501 with a problem that points to pg_dump")
    func unsupported() async throws {
        try await TestService().test { client in
            let response = try await client.get("/v1/backup", key: adminKey)
            #expect(response.status == .notImplemented)
            #expect(response.headers[.contentType] == "application/problem+json")
            let problem = try json(response)
            #expect((problem["type"] as? String)?.hasSuffix("backup-unsupported") == true)
            #expect((problem["detail"] as? String)?.contains("pg_dump") == true)
        }
    }
}
