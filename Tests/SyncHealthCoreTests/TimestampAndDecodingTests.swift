import Foundation
import SyncHealthMonitorFixtures
import Testing

@testable import SyncHealthCore

@Suite("Timestamps and durations")
struct TimestampTests {
    @Test("RFC 3339 round trips, with offsets and fractions")
    func rfc3339() {
        #expect(Timestamp(rfc3339: "1970-01-01T00:00:00Z")?.microseconds == 0)
        #expect(Timestamp(rfc3339: "2026-11-22T10:00:00.120Z")?.rfc3339 == "2026-11-22T10:00:00.120Z")
        #expect(Timestamp(rfc3339: "2026-11-22T11:00:00+01:00") == Timestamp(rfc3339: "2026-11-22T10:00:00Z"))
        #expect(Timestamp(rfc3339: "2024-02-29T23:59:59.1234567Z")?.rfc3339 == "2024-02-29T23:59:59.123456Z")
        #expect(Timestamp(rfc3339: "1969-12-31T23:59:59.5Z")?.microseconds == -500_000)
        #expect(Timestamp(rfc3339: "1969-12-31T23:59:59.5Z")?.rfc3339 == "1969-12-31T23:59:59.500Z")
        // Lowercase 't' and 'z', a space for the 'T', a negative offset, and a substring all parse.
        #expect(Timestamp(rfc3339: "2026-11-22t10:00:00.120z")?.rfc3339 == "2026-11-22T10:00:00.120Z")
        #expect(Timestamp(rfc3339: "2026-11-22 10:00:00Z") == Timestamp(rfc3339: "2026-11-22T10:00:00Z"))
        #expect(Timestamp(rfc3339: "2026-11-22T08:30:00-01:30") == Timestamp(rfc3339: "2026-11-22T10:00:00Z"))
        #expect(Timestamp(rfc3339: "at 2026-11-22T10:00:00Z".dropFirst(3)) == Timestamp(rfc3339: "2026-11-22T10:00:00Z"))
    }

    @Test(
        "malformed dates are refused",
        arguments: [
            "", "2026-11-22", "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z",
            "2026-11-22T24:00:00Z", "2026-11-22T10:00:00", "2026-11-22T10:00:00.Z",
            "2026-11-22T10:00:00Zjunk", "２０２６-11-22T10:00:00Z", "2026-11-22T10:00:00+1:00",
        ]
    )
    func malformed(text: String) {
        #expect(Timestamp(rfc3339: text) == nil)
    }

    @Test("configuration durations")
    func durations() {
        #expect(Duration(configuration: "90s") == .seconds(90))
        #expect(Duration(configuration: "15m") == .seconds(900))
        #expect(Duration(configuration: "2h") == .seconds(7200))
        #expect(Duration(configuration: "0.5") == .milliseconds(500))
        #expect(Duration(configuration: "250ms") == .milliseconds(250))
        #expect(Duration(configuration: "-1s") == nil)
        #expect(Duration(configuration: "abc") == nil)
        #expect(Duration(configuration: "") == nil)
    }
}

@Suite("Event batch decoding")
struct EventBatchDecodingTests {
    static let example = """
        {"device": {"deviceId": "8F1C2A6E-3B7D-4C1A-9E55-0D7A1B2C3D4E", "appId": "com.example.notes",
          "containerId": "iCloud.com.example.notes", "platform": "iOS", "osVersion": "18.2", "appVersion": "3.4"},
         "events": [
          {"eventId": "e-1", "occurredAt": "2026-11-22T10:00:00Z", "kind": "account", "status": "available"},
          {"eventId": "e-2", "occurredAt": "2026-11-22T10:00:00.120Z", "kind": "network", "available": true},
          {"eventId": "e-3", "occurredAt": "2026-11-22T10:00:01Z", "kind": "activity", "phase": "setup", "state": "started"},
          {"eventId": "e-4", "occurredAt": "2026-11-22T10:00:02Z", "kind": "activity", "phase": "export", "state": "failed",
           "error": {"domain": "CKErrorDomain", "code": 2, "message": "partial", "retryAfterSeconds": 30, "partialErrors": {"14": 2, "25": 1}}},
          {"eventId": "e-5", "occurredAt": "2026-11-22T10:00:03Z", "kind": "pending", "pendingChanges": 3, "oldestPendingAt": "2026-11-22T09:00:00Z"},
          {"eventId": "e-6", "occurredAt": "2026-11-22T10:00:04Z", "kind": "heartbeat", "clientSummary": "error"}
         ]}
        """

    @Test("the contract's example decodes completely")
    func example() throws {
        let batch = try EventBatch.decode(json: Data(Self.example.utf8))
        #expect(batch.key == DeviceKey(appId: "com.example.notes", deviceId: "8F1C2A6E-3B7D-4C1A-9E55-0D7A1B2C3D4E"))
        #expect(batch.info.containerId == "iCloud.com.example.notes")
        #expect(batch.events.count == 6)
        #expect(batch.rejected.isEmpty)
        guard case .activity(let a) = batch.events[3].body else {
            Issue.record("not an activity")
            return
        }
        #expect(a.error?.partialErrors == [14: 2, 25: 1])
        #expect(a.error?.errorClass == .userAction)
        #expect(batch.events[4].body == .pending(count: 3, oldestPendingAt: Timestamp(rfc3339: "2026-11-22T09:00:00Z")))
        #expect(batch.events[5].body == .heartbeat(clientSummary: .error))
    }

    @Test("invalid events are rejected one by one, with their index")
    func perEventRejection() throws {
        let json = """
            {"device": {"deviceId": "d", "appId": "a"}, "events": [
              {"eventId": "ok", "occurredAt": "2026-11-22T10:00:00Z", "kind": "network", "available": true},
              {"eventId": "bad-kind", "occurredAt": "2026-11-22T10:00:00Z", "kind": "weather"},
              {"eventId": "bad-type", "occurredAt": "2026-11-22T10:00:00Z", "kind": "network", "available": "yes"},
              {"occurredAt": "2026-11-22T10:00:00Z", "kind": "network", "available": true},
              {"eventId": "bad-date", "occurredAt": "yesterday", "kind": "network", "available": true},
              42,
              {"eventId": "neg", "occurredAt": "2026-11-22T10:00:00Z", "kind": "pending", "pendingChanges": -1},
              {"eventId": "phase", "occurredAt": "2026-11-22T10:00:00Z", "kind": "activity", "phase": "sync", "state": "started"},
              {"eventId": "err", "occurredAt": "2026-11-22T10:00:00Z", "kind": "activity", "phase": "import", "state": "failed", "error": {"code": 3}}
            ]}
            """
        let batch = try EventBatch.decode(json: Data(json.utf8))
        #expect(batch.events.map(\.eventId) == ["ok"])
        #expect(batch.rejected.map(\.index) == [1, 2, 3, 4, 5, 6, 7, 8])
        #expect(batch.rejected[0].detail.contains("kind"))
        #expect(batch.rejected[2].detail == "eventId is required")
    }

    @Test("a bad envelope throws with JSON pointers")
    func envelope() {
        func problems(_ json: String) -> [String] {
            do {
                _ = try EventBatch.decode(json: Data(json.utf8))
                return []
            } catch {
                return error.errors.map(\.pointer)
            }
        }
        #expect(problems("not json") == [""])
        #expect(problems("{}") == ["/device"])
        #expect(problems(#"{"device": {"appId": "a"}, "events": []}"#) == ["/device/deviceId", "/events"])
        #expect(problems(#"{"device": {"appId": "a b", "deviceId": "d"}, "events": [{}]}"#) == ["/device/appId"])
        #expect(problems(#"{"device": {"appId": "a", "deviceId": 5}, "events": [{}]}"#) == ["/device/deviceId"])
        let tooMany = "[" + Array(repeating: "{}", count: 1001).joined(separator: ",") + "]"
        #expect(problems(#"{"device": {"appId": "a", "deviceId": "d"}, "events": "# + tooMany + "}") == ["/events"])
    }

    @Test("names and values written with escapes or non-ASCII text read as their text")
    func escapedNamesAndValues() throws {
        // The decoder compares plainly written names byte by byte; written any other way, they are decoded first.
        let json = #"""
            {"\u0064evice": {"deviceId": "d", "app\u0049d": "a", "platform": "i\u004fS \u00e9t\u00e9"},
             "even\u0074s": [
              {"\u0065ventId": "caf\u00e9", "occurredAt": "2026-11-22T10:00:00\u005A", "kind": "netw\u006frk", "available": true},
              {"eventId": "é", "occurredAt": "2026-11-22T10:00:01Z", "kind": "network", "availablé": true}
             ]}
            """#
        let batch = try EventBatch.decode(json: Data(json.utf8))
        #expect(batch.key == DeviceKey(appId: "a", deviceId: "d"))
        #expect(batch.info.platform == "iOS été")
        #expect(batch.events.map(\.eventId) == ["café"])
        #expect(batch.events.first?.occurredAt == Timestamp(rfc3339: "2026-11-22T10:00:00Z"))
        #expect(batch.events.first?.body == .network(available: true))
        #expect(batch.rejected.map(\.detail) == ["available is required"])
    }

    @Test("an events array written with an escaped name still has the events limit")
    func escapedEventsLimit() {
        let tooMany = "[" + Array(repeating: "{}", count: 1001).joined(separator: ",") + "]"
        do {
            _ = try EventBatch.decode(json: Data((#"{"device": {"appId": "a", "deviceId": "d"}, "\u0065vents": "# + tooMany + "}").utf8))
            Issue.record("decoded")
        } catch {
            #expect(error.errors == [.init(pointer: "/events", detail: "events must hold 1 to 1000 events")])
        }
    }
}
