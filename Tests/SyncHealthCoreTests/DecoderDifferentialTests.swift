import Foundation
import SyncHealthMonitorFixtures
import SyncHealthTestSupport
import Testing

@testable import SyncHealthCore

/// The byte-level event decoder against the `JSONDecoder`-based one it replaced (`ReferenceDecoder`): the same
/// events, the same rejections and the same envelope errors, for generated bodies valid and invalid.
@Suite("Event decoder: byte-level parser vs JSONDecoder")
struct DecoderDifferentialTests {
    /// The outcome of a decoder, comparable.
    enum Outcome: Equatable {
        case batch(EventBatch)
        case invalid([BatchValidationError.Item])
    }

    static func production(_ body: String) -> Outcome {
        do { return .batch(try EventBatch.decode(json: Data(body.utf8))) } catch { return .invalid(error.errors) }
    }

    /// What the byte-level decoder must answer: the reference's outcome for valid JSON, "not valid JSON" otherwise.
    /// `JSONDecoder` is lazy: it accepts some invalid JSON (`01`, control characters or bad escapes in strings
    /// it then fails to read, trailing commas) and answers with a type error. `JSONSerialization` judges validity;
    /// it accepts trailing commas, which RFC 8259 does not, so those count as invalid here.
    /// One message was wrong in the reference and is fixed: `"events": {}` said "expected an object".
    static func expected(_ data: Data) -> Outcome {
        let text = String(decoding: data, as: UTF8.self)
        let valid =
            (try? JSONSerialization.jsonObject(with: data, options: .fragmentsAllowed)) != nil
            && text.range(of: #",\s*[\]}]"#, options: .regularExpression) == nil
        guard valid else { return .invalid([.init(pointer: "", detail: "the body is not valid JSON")]) }
        do {
            return .batch(try ReferenceDecoder.decode(json: data))
        } catch {
            return .invalid(
                error.errors.map { item in
                    item == .init(pointer: "/events", detail: "expected an object") ? .init(pointer: "/events", detail: "expected an array") : item
                }
            )
        }
    }

    static func expected(_ body: String) -> Outcome { expected(Data(body.utf8)) }

    /// A JSON value for a field: usually right, sometimes of another type, null, or odd but valid.
    static func value<R: RandomNumberGenerator>(_ good: String, rng: inout R) -> String {
        switch Int.random(in: 0..<40, using: &rng) {
        case 0: "null"
        case 1: "42"
        case 2: "true"
        case 3: "\"x\""
        case 4: "{}"
        case 5: "[1]"
        case 6: "1.5"
        default: good
        }
    }

    static func timestamp<R: RandomNumberGenerator>(rng: inout R) -> String {
        [
            "\"2026-11-22T10:00:00Z\"", "\"2026-11-22T10:00:00.123Z\"", "\"2026-11-22T12:00:00+02:00\"", "\"yesterday\"",
            "\"2026-11-22T10:00:00\\u005A\"",
        ].randomElement(using: &rng) ?? "null"
    }

    static func event<R: RandomNumberGenerator>(_ i: Int, rng: inout R) -> String {
        if Int.random(in: 0..<20, using: &rng) == 0 { return ["42", "null", "[]", "\"e\"", "{}"].randomElement(using: &rng) ?? "{}" }
        var fields: [String] = []
        func add(_ name: String, _ good: String) {
            if Int.random(in: 0..<12, using: &rng) == 0 { return }  // missing
            fields.append("\"\(name)\": " + value(good, rng: &rng))
        }
        let ids = [
            "\"e-\(i)\"", "\"\"", "\"caf\\u00e9-\(i)\"", "\"\\ud83d\\ude00-\(i)\"", "\"" + String(repeating: "i", count: 129) + "\"",
            "\"tab\\t\(i)\"",
        ]
        add("eventId", Int.random(in: 0..<4, using: &rng) == 0 ? (ids.randomElement(using: &rng) ?? "\"e\"") : "\"e-\(i)\"")
        add("occurredAt", timestamp(rng: &rng))
        let kinds = ["activity", "network", "account", "pending", "heartbeat", "weather"]
        let kind = kinds.randomElement(using: &rng) ?? "network"
        add("kind", "\"\(kind)\"")
        switch kind {
        case "activity":
            add("phase", ["\"setup\"", "\"import\"", "\"export\"", "\"sync\""].randomElement(using: &rng) ?? "\"import\"")
            add("state", ["\"started\"", "\"succeeded\"", "\"failed\"", "\"done\""].randomElement(using: &rng) ?? "\"started\"")
            if Bool.random(using: &rng) { add("startedAt", timestamp(rng: &rng)) }
            if Bool.random(using: &rng) { add("endedAt", timestamp(rng: &rng)) }
            if Bool.random(using: &rng) { add("activityId", "\"act-\(i)\"") }
            if Bool.random(using: &rng) {
                var e: [String] = []
                func addE(_ name: String, _ good: String) {
                    if Int.random(in: 0..<8, using: &rng) == 0 { return }
                    e.append("\"\(name)\": " + value(good, rng: &rng))
                }
                addE("domain", ["\"CKErrorDomain\"", "\"\"", "\"NSCocoaErrorDomain\""].randomElement(using: &rng) ?? "\"CKErrorDomain\"")
                addE("code", ["2", "3", "9", "-1", "3.0", "1e1", "25"].randomElement(using: &rng) ?? "2")
                if Bool.random(using: &rng) { addE("message", "\"m\\\"essage \\\\ \\/ \\n\"") }
                if Bool.random(using: &rng) { addE("retryAfterSeconds", ["30", "1.5", "-0", "2E2"].randomElement(using: &rng) ?? "30") }
                if Bool.random(using: &rng) {
                    let items = (0..<Int.random(in: 0..<5, using: &rng)).map { k in
                        "\"\(["14", "25", "x", "-3"][k % 4])\": \(["2", "0", "-1", "1.5"].randomElement(using: &rng) ?? "1")"
                    }
                    addE("partialErrors", "{" + items.joined(separator: ", ") + "}")
                }
                fields.append("\"error\": " + (Int.random(in: 0..<10, using: &rng) == 0 ? "\"oops\"" : "{" + e.joined(separator: ", ") + "}"))
            }
        case "network": add("available", "true")
        case "account": add("status", ["\"available\"", "\"noAccount\"", "\"restricted\"", "\"gone\""].randomElement(using: &rng) ?? "\"available\"")
        case "pending":
            add("pendingChanges", ["3", "0", "-1", "7.0", "99999999999999999999"].randomElement(using: &rng) ?? "3")
            if Bool.random(using: &rng) { add("oldestPendingAt", timestamp(rng: &rng)) }
        case "heartbeat": add("clientSummary", ["\"error\"", "\"succeeded\"", "\"bogus\""].randomElement(using: &rng) ?? "\"error\"")
        default: break
        }
        if Int.random(in: 0..<5, using: &rng) == 0 { fields.append("\"extra\": {\"nested\": [1, 2, {\"a\": null}]}") }
        fields.shuffle(using: &rng)
        return "{" + fields.joined(separator: ", ") + "}"
    }

    static func body<R: RandomNumberGenerator>(rng: inout R) -> String {
        var device: [String] = []
        for (name, good) in [
            ("deviceId", "\"dev-1\""), ("appId", "\"com.example\""), ("containerId", "\"iCloud.com.example\""),
            ("platform", "\"iOS\""), ("osVersion", "\"18.2\""), ("appVersion", "\"3.4\""),
        ] {
            if Int.random(in: 0..<10, using: &rng) == 0 { continue }
            let odd = ["\"bad id\"", "\"" + String(repeating: "p", count: 300) + "\""].randomElement(using: &rng) ?? "\"x\""
            device.append("\"\(name)\": " + value(Int.random(in: 0..<15, using: &rng) == 0 ? odd : good, rng: &rng))
        }
        let events = (0..<Int.random(in: 0..<8, using: &rng)).map { event($0, rng: &rng) }
        var envelope: [String] = []
        if Int.random(in: 0..<15, using: &rng) != 0 {
            envelope.append("\"device\": " + (Int.random(in: 0..<20, using: &rng) == 0 ? "[]" : "{" + device.joined(separator: ", ") + "}"))
        }
        if Int.random(in: 0..<15, using: &rng) != 0 {
            envelope.append("\"events\": " + (Int.random(in: 0..<20, using: &rng) == 0 ? "{}" : "[" + events.joined(separator: ", ") + "]"))
        }
        envelope.shuffle(using: &rng)
        return " {\n" + envelope.joined(separator: ",\n") + "}\n"
    }

    @Test("generated bodies decode the same: events, rejections with their details, envelope errors with pointers")
    func generatedBodies() {
        var rng = SplitMix64(seed: 0x5EED_0DEC)
        var batches = 0
        var invalid = 0
        var rejections = 0
        for _ in 0..<3000 {
            let body = Self.body(rng: &rng)
            let expected = Self.expected(body)
            let actual = Self.production(body)
            #expect(actual == expected, "\(body)")
            if actual != expected { return }
            switch expected {
            case .batch(let b):
                batches += 1
                rejections += b.rejected.count
            case .invalid: invalid += 1
            }
        }
        // The generator reaches every outcome.
        #expect(batches > 500 && invalid > 200 && rejections > 1000, "\(batches) batches, \(invalid) invalid, \(rejections) rejections")
    }

    @Test("bodies with a byte changed, dropped or doubled: valid JSON or not alike, and the same outcome")
    func mutatedBodies() {
        var rng = SplitMix64(seed: 0xB17E)
        for _ in 0..<3000 {
            var bytes = Array(Self.body(rng: &rng).utf8)
            let at = Int.random(in: 0..<bytes.count, using: &rng)
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: bytes[at] = Array("{}[]\",:\\0123456789.eE-+tfnul \u{1} x".utf8).randomElement(using: &rng) ?? 0
            case 1: bytes.remove(at: at)
            default: bytes.insert(bytes[at], at: at)
            }
            let data = Data(bytes)
            let expected = Self.expected(data)
            let actual: Outcome
            do { actual = .batch(try EventBatch.decode(json: data)) } catch { actual = .invalid(error.errors) }
            #expect(actual == expected, "\(String(decoding: bytes, as: UTF8.self))")
            if actual != expected { return }
        }
    }

    @Test("JSON edge cases: escapes, surrogates, numbers, nesting, whitespace, invalid UTF-8")
    func edgeCases() {
        let device = #""device": {"deviceId": "d", "appId": "a"}"#
        func pending(_ n: String) -> String {
            #"{\#(device), "events": [{"eventId": "e", "occurredAt": "2026-11-22T10:00:00Z", "kind": "pending", "pendingChanges": \#(n)}]}"#
        }
        let bodies = [
            pending("0"), pending("-0"), pending("1E2"), pending("1e-2"), pending("01"), pending("1."), pending(".5"), pending("+1"),
            pending("9223372036854775807"), pending("9223372036854775808"), pending("1e400"), pending("NaN"),
            #"{\#(device), "events": [{"eventId": "\ud83d", "occurredAt": "2026-11-22T10:00:00Z", "kind": "network", "available": true}]}"#,
            #"{\#(device), "events": [{"eventId": "\u0000", "occurredAt": "2026-11-22T10:00:00Z", "kind": "network", "available": true}]}"#,
            #"{\#(device), "events": [{"eventId": "\x", "occurredAt": "2026-11-22T10:00:00Z", "kind": "network", "available": true}]}"#,
            #"{\#(device), "events": [], }"#, #"{\#(device), "events": [1,]}"#, "{\(device), \"events\": [{\"a\": \"\u{1}\"}]}",
            "[" + String(repeating: "[", count: 200) + String(repeating: "]", count: 201),
            String(repeating: "[", count: 400) + String(repeating: "]", count: 400),
            String(repeating: "[", count: 600) + String(repeating: "]", count: 600), "", " ", "null", "\"s\"", "{\"device\": {}} x",
            #"{"device": {"deviceId": "d", "deviceId": "e", "appId": "a"}, "events": [{}]}"#,
        ]
        for body in bodies {
            #expect(Self.production(body) == Self.expected(body), "\(body)")
        }
        let invalidUTF8 = Data([0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D])
        #expect(throws: BatchValidationError.self) { try EventBatch.decode(json: invalidUTF8) }
    }
}
