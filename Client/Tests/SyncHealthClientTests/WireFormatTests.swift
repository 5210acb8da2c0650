import Foundation
import Testing

@testable import SyncHealthClient

@Suite("Wire format: event JSON, event ids, gzip")
struct WireFormatTests {
    func object(_ json: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
    }

    @Test("an activity failure is written with the contract's fields, the error's class inputs and per-code counts")
    func activityJSON() throws {
        let error = SyncErrorReport(
            domain: "CKErrorDomain",
            code: 2,
            message: "a \"quoted\"\nline",
            retryAfterSeconds: 30,
            partialErrors: [14: 2, 25: 1]
        )
        let event = DeviceEvent(
            eventId: "e-1",
            occurredAt: Timestamp(seconds: 1_795_000_000.12),
            body: .activity(
                .init(
                    phase: .export,
                    state: .failed,
                    startedAt: Timestamp(seconds: 1_795_000_000),
                    endedAt: Timestamp(seconds: 1_795_000_000.12),
                    activityId: "A",
                    error: error
                )
            )
        )
        let o = try object(EventJSON.encode(event))
        #expect(o["eventId"] as? String == "e-1")
        #expect(o["occurredAt"] as? String == "2026-11-18T11:06:40.120Z")
        #expect(o["kind"] as? String == "activity")
        #expect(o["phase"] as? String == "export")
        #expect(o["state"] as? String == "failed")
        #expect(o["activityId"] as? String == "A")
        #expect(o["startedAt"] as? String == "2026-11-18T11:06:40Z")
        let e = try #require(o["error"] as? [String: Any])
        #expect(e["domain"] as? String == "CKErrorDomain")
        #expect(e["code"] as? Int == 2)
        #expect(e["message"] as? String == "a \"quoted\"\nline")
        #expect(e["retryAfterSeconds"] as? Double == 30)
        #expect(e["partialErrors"] as? [String: Int] == ["14": 2, "25": 1])
    }

    @Test("network, account, pending and heartbeat events carry their fields")
    func otherKinds() throws {
        let at = Timestamp(seconds: 1_795_000_000)
        #expect(
            try object(EventJSON.encode(DeviceEvent(eventId: "n", occurredAt: at, body: .network(available: false))))["available"] as? Bool == false
        )
        #expect(
            try object(EventJSON.encode(DeviceEvent(eventId: "a", occurredAt: at, body: .account(.noAccount))))["status"] as? String == "noAccount"
        )
        let pending = try object(EventJSON.encode(DeviceEvent(eventId: "p", occurredAt: at, body: .pending(count: 3, oldestPendingAt: at))))
        #expect(pending["pendingChanges"] as? Int == 3)
        #expect(pending["oldestPendingAt"] as? String == "2026-11-18T11:06:40Z")
        let heartbeat = try object(EventJSON.encode(DeviceEvent(eventId: "h", occurredAt: at, body: .heartbeat(clientSummary: .error))))
        #expect(heartbeat["kind"] as? String == "heartbeat")
        #expect(heartbeat["clientSummary"] as? String == "error")
    }

    @Test("control characters and non-ASCII text survive the hand-written encoder")
    func escaping() throws {
        let text = "tab\t bell\u{7} é 🌩 back\\slash"
        #expect(try object("{" + "\"x\":" + EventJSON.quoted(text) + "}")["x"] as? String == text)
    }

    @Test("event ids are UUIDv7, grow within a millisecond and when the clock steps back, and sort as generated")
    func eventIds() {
        var generator = EventIdGenerator()
        var ids: [String] = []
        for millis: UInt64 in [1_795_000_000_000, 1_795_000_000_000, 1_795_000_000_000, 1_794_999_999_000, 1_795_000_000_005] {
            ids.append(generator.next(unixMillis: millis))
        }
        #expect(ids == ids.sorted())
        #expect(Set(ids).count == ids.count)
        for id in ids {
            #expect(id.count == 36)
            #expect(Array(id)[14] == "7", "version 7")
            #expect("89ab".contains(Array(id)[19]), "variant 10")
            #expect(UUID(uuidString: id) != nil)
        }
        #expect(EventIdGenerator.millis(of: ids[0]) == 1_795_000_000_000)
        // A generator started after an id stored by an earlier launch sorts after it, whatever the clock says.
        var later = EventIdGenerator(after: ids.last)
        #expect(later.next(unixMillis: 1_000) > ids.last ?? "")
    }

    @Test("gzip output inflates back to the input")
    func gzipRoundTrip() throws {
        let input = Data((0..<5000).map { _ in UInt8.random(in: 65...70) })
        let compressed = try Gzip.compress(input)
        #expect(compressed.prefix(2) == Data([0x1F, 0x8B]))
        #expect(try gunzip(compressed) == input)
    }
}
