import Foundation
import Testing

@testable import SyncHealthClient

@Suite("The on-disk queue")
struct EventQueueTests {
    let limits = EventQueue.Limits(maxEvents: 10_000, maxBytes: 5 << 20)

    func entries(_ range: ClosedRange<Int>) -> [EventQueue.Entry] {
        range.map { EventQueue.Entry(id: String(format: "id-%06d", $0), json: #"{"n":\#($0)}"#) }
    }

    @Test("appended events survive a reopen; acknowledged ones do not come back")
    func reopen() throws {
        let dir = temporaryDirectory()
        do {
            let q = try EventQueue(directory: dir, limits: limits)
            try q.append(entries(1...5))
            try q.acknowledge(2)
        }
        let q = try EventQueue(directory: dir, limits: limits)
        #expect(q.pending.map(\.id) == entries(3...5).map(\.id))
        #expect(q.lastId == "id-000005")
    }

    @Test("a last line cut short by a kill is dropped and the log goes on after it")
    func tornLine() throws {
        let dir = temporaryDirectory()
        do {
            let q = try EventQueue(directory: dir, limits: limits)
            try q.append(entries(1...2))
        }
        let log = dir.appendingPathComponent("events.log")
        let handle = try FileHandle(forWritingTo: log)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(#"id-000003 {"n":"#.utf8))
        try handle.close()
        do {
            let q = try EventQueue(directory: dir, limits: limits)
            #expect(q.pending.map(\.id) == ["id-000001", "id-000002"])
            try q.append(entries(4...4))
        }
        #expect(try EventQueue(directory: dir, limits: limits).pending.map(\.id) == ["id-000001", "id-000002", "id-000004"])
    }

    @Test("over its limits the queue drops the oldest events and counts them")
    func bounded() throws {
        let q = try EventQueue(directory: temporaryDirectory(), limits: .init(maxEvents: 3, maxBytes: 1 << 20))
        #expect(try q.append(entries(1...5)) == 2)
        #expect(q.pending.map(\.id) == ["id-000003", "id-000004", "id-000005"])
        #expect(q.droppedCount == 2)
        let bytes = try EventQueue(directory: temporaryDirectory(), limits: .init(maxEvents: 100, maxBytes: 1024))
        try bytes.append((1...100).map { EventQueue.Entry(id: String(format: "id-%06d", $0), json: String(repeating: "x", count: 100)) })
        #expect(bytes.bytes <= 1024)
        #expect(bytes.pending.last?.id == "id-000100")
    }

    @Test("once acknowledged lines are most of the log, it is rewritten without them")
    func compaction() throws {
        let dir = temporaryDirectory()
        let q = try EventQueue(directory: dir, limits: limits)
        let big = (1...300).map { EventQueue.Entry(id: String(format: "id-%06d", $0), json: String(repeating: "y", count: 400)) }
        try q.append(big)
        try q.acknowledge(250)
        let size = try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent("events.log").path)[.size] as? Int
        #expect((size ?? 0) < 50 * 420, "the log keeps only the 50 pending lines")
        try q.append(entries(301...301).map { EventQueue.Entry(id: String(format: "id-%06d", 301), json: $0.json) })
        let reopened = try EventQueue(directory: dir, limits: limits)
        #expect(reopened.count == 51)
        #expect(reopened.pending.first?.id == "id-000251")
    }
}
