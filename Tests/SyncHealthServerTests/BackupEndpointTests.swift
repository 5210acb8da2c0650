import Foundation
import GRDB
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthServer
import SyncHealthStore
import SyncHealthTestSupport
import Synchronization
import Testing

@testable import SyncHealthSQLite

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
            #expect(response.headers[.connection] == "close", "the connection ends with the copy, and says so")
            let file = (temporaryDirectory() as NSString).appendingPathComponent("backup.sqlite")
            try Data(response.body.readableBytesView).write(to: URL(fileURLWithPath: file))
            let contents = try SQLiteStore.checkBackup(at: file)
            #expect(contents.devices == 1, "the device posted just before, though no fold had run")
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("synchealth-backup-") }
            #expect(leftovers.isEmpty)
        }
    }

    @Test("a client that goes away stops the copy and its file goes; the next backup is whole")
    func clientGoneStopsTheCopy() async throws {
        let directory = temporaryDirectory()
        let store = try SQLiteStore(directory: directory, synchronous: .normal)
        // Enough to copy that the copy pauses at least once.
        let key = DeviceKey(appId: "app", deviceId: "many-ids")
        _ = try await store.record((0..<40_000).map { "event-\($0)" }, of: key, at: Timestamp(microseconds: 1_000_000))
        try await store.fold()
        // A minute's pause after each millisecond of work: only a stop ends this copy within the test.
        store.backupPace.withLock { $0 = (work: .milliseconds(1), pause: .seconds(60)) }
        let service = TestService(store: .local(store))
        try await service.test(.live) { client in
            try await client.post(batch(notSyncingEvents))
            let port = try #require(client.port)
            var connection = RawConnection(port: port)
            #expect(connection != nil)
            connection?.send("GET /v1/backup HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(adminKey)\r\n\r\n")
            let copies = {
                (try? FileManager.default.contentsOfDirectory(atPath: directory))?.filter { $0.hasPrefix("synchealth-backup-") } ?? []
            }
            #expect(try await eventually { !copies().isEmpty }, "the copy started")
            connection = nil
            #expect(try await eventually { copies().isEmpty }, "the copy stopped and its file went")

            store.backupPace.withLock { $0 = (work: .milliseconds(4), pause: .zero) }
            let response = try await client.get("/v1/backup", key: adminKey)
            #expect(response.status == .ok)
            let file = (temporaryDirectory() as NSString).appendingPathComponent("backup.sqlite")
            try Data(response.body.readableBytesView).write(to: URL(fileURLWithPath: file))
            #expect(try SQLiteStore.checkBackup(at: file).devices == 1, "the posted device (ids alone make no device)")
        }
    }

    @Test("a client that asks again as soon as it has the whole copy finds the slot free: backups back to back are never refused")
    func backToBack() async throws {
        let directory = temporaryDirectory()
        let service = TestService(store: .local(try SQLiteStore(directory: directory, synchronous: .normal)))
        try await service.test(.live) { client in
            try await client.post(batch(notSyncingEvents))
            let port = try #require(client.port)
            var statuses: [String] = []
            var whole = 0
            for _ in 0..<100 {
                // A new connection each time, sent as soon as the last byte of the copy before has arrived.
                let connection = try #require(RawConnection(port: port))
                connection.send("GET /v1/backup HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(adminKey)\r\nConnection: close\r\n\r\n")
                let response = connection.receiveWholeResponse()
                statuses.append(response.status)
                if response.whole { whole += 1 }
            }
            #expect(statuses.allSatisfy { $0 == "200" }, "\(statuses.filter { $0 != "200" }) of 100")
            #expect(whole == 100, "every answer read to its content-length")
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

extension RawConnection {
    /// Reads one response to its last byte (its `content-length`), as bytes: its status code, and whether its body
    /// came whole.
    func receiveWholeResponse() -> (status: String, whole: Bool) {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let separator = Array("\r\n\r\n".utf8)
        var headerEnd: Int?
        var length: Int?
        while true {
            if headerEnd == nil, let end = bytes.indices.dropLast(3).first(where: { Array(bytes[$0..<$0 + 4]) == separator }) {
                headerEnd = end + 4
                let head = String(decoding: bytes[..<end], as: UTF8.self).lowercased()
                length =
                    head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
            }
            if let headerEnd, let length, bytes.count - headerEnd >= length { break }
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            bytes += buffer[0..<n]
        }
        let status = String(decoding: bytes.prefix(12), as: UTF8.self).split(separator: " ").dropFirst().first.map(String.init) ?? "none"
        let whole = headerEnd.map { end in length.map { bytes.count - end == $0 } ?? false } ?? false
        return (status, whole)
    }
}
