import Foundation
import GRDB
import SyncHealthCore
import SyncHealthStore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthSQLite

@Suite("App Attest's counters on SQLite: moved in memory, written in the background, kept across a restart")
struct CounterBookTests {
    static func attestation(_ deviceId: String, key: UInt8) -> DeviceAttestation {
        DeviceAttestation(
            device: DeviceKey(appId: "com.a", deviceId: deviceId),
            keyId: Array(repeating: key, count: 32),
            publicKey: [4] + Array(repeating: key, count: 64),
            environment: "production",
            receipt: [1],
            counter: 0,
            attestedAt: t0
        )
    }

    /// The counter the table holds, as the next process would read it.
    static func stored(_ store: SQLiteStore, key: UInt8) async throws -> Int64? {
        try await store.pool.read { db in
            try Int64.fetchOne(
                db,
                sql: "SELECT counter FROM device_attestations WHERE key_id = ?",
                arguments: [Data(Array(repeating: key, count: 32))]
            )
        }
    }

    @Test("a move answers at once and reads back; the table has it once flushed; closing flushes; a reopened store refuses the replay")
    func writtenAndKept() async throws {
        let directory = temporaryDirectory()
        let store = try SQLiteStore(directory: directory, synchronous: .normal)
        let key = Array(repeating: UInt8(1), count: 32)
        _ = try await store.saveAttestation(Self.attestation("d1", key: 1), replacing: nil)
        #expect(try await store.advanceCounter(appId: "com.a", keyId: key, to: 5, appVersion: "1.0"))
        #expect(try await store.attestation(appId: "com.a", keyId: key)?.counter == 5, "read back before it is written")
        #expect(try await Self.stored(store, key: 1) == 0, "not written yet: no transaction of its own")
        #expect(try await store.attestedDevicesByAppVersion(appId: "com.a") == ["1.0": 1], "a count by version writes first")
        #expect(try await Self.stored(store, key: 1) == 5)
        #expect(try await store.advanceCounter(appId: "com.a", keyId: key, to: 9, appVersion: "1.1"))
        try await store.close()

        let reopened = try SQLiteStore(directory: directory, synchronous: .normal)
        #expect(try await Self.stored(reopened, key: 1) == 9, "closing wrote the last move")
        #expect(try await !reopened.advanceCounter(appId: "com.a", keyId: key, to: 9, appVersion: nil), "the replay is refused after a restart")
        #expect(try await reopened.advanceCounter(appId: "com.a", keyId: key, to: 10, appVersion: nil))
        try await reopened.close()
    }

    @Test("a key replaced or deleted starts from its row, not from a move held for the old one; a key saved again keeps its counter")
    func replacedKeys() async throws {
        let store = try SQLiteStore(directory: temporaryDirectory(), synchronous: .normal)
        let key = Array(repeating: UInt8(2), count: 32)
        let old = Array(repeating: UInt8(3), count: 32)
        _ = try await store.saveAttestation(Self.attestation("d2", key: 3), replacing: nil)
        #expect(try await store.advanceCounter(appId: "com.a", keyId: old, to: 40, appVersion: nil))
        #expect(try await store.saveAttestation(Self.attestation("d2", key: 3), replacing: nil) == .unchanged)
        #expect(try await store.attestation(appId: "com.a", keyId: old)?.counter == 40, "saved again: no counter goes back")
        #expect(try await store.saveAttestation(Self.attestation("d2", key: 2), replacing: old) == .saved(replaced: old))
        #expect(try await store.attestation(appId: "com.a", keyId: key)?.counter == 0)
        try await store.flushCounters()
        #expect(try await Self.stored(store, key: 2) == 0)
        #expect(try await Self.stored(store, key: 3) == nil, "the old key's move is not written back")
        #expect(try await store.advanceCounter(appId: "com.a", keyId: key, to: 1, appVersion: nil))
        try await store.deleteAttestation(of: DeviceKey(appId: "com.a", deviceId: "d2"), at: Timestamp(microseconds: 1))
        #expect(try await !store.advanceCounter(appId: "com.a", keyId: key, to: 2, appVersion: nil), "a deleted key moves no more")
        try await store.close()
    }

    @Test("past its limit the book drops only what the table holds: a key loaded again goes on from the written counter")
    func limit() async throws {
        let store = try SQLiteStore(directory: temporaryDirectory(), synchronous: .normal)
        let book = CounterBook(limit: 2)
        for key in UInt8(1)...5 { _ = try await store.saveAttestation(Self.attestation("d\(key)", key: key), replacing: nil) }
        func advance(_ key: UInt8, _ counter: UInt32) async throws -> Bool {
            try await book.advance(CounterBook.Key(appId: "com.a", keyId: Array(repeating: key, count: 32)), to: counter, appVersion: nil) {
                let stored = try await Self.stored(store, key: key)
                return stored.map { CounterBook.Entry(counter: UInt32($0), appVersion: nil) }
            }
        }
        for key in UInt8(1)...5 { #expect(try await advance(key, 7)) }
        #expect(book.count == 5)
        try await book.flush(store.pool)
        #expect(book.count == 0, "all written, so all may go")
        #expect(try await !advance(3, 7), "loaded again: the written counter holds")
        #expect(try await advance(3, 8))
        #expect(try await !advance(9, 1), "no such key")
        try await store.close()
    }
}
