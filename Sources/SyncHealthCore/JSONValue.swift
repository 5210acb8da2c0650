/// A parsed JSON value. The event decoder reads request bodies into this and validates from it: one pass over
/// the bytes, no `Codable` machinery (Foundation's `JSONDecoder` was the top cost of ingestion).
enum JSONValue: Equatable {
    case null
    case bool(Bool)
    /// A number as a `Double`, and as an `Int` when it is integral and fits (`3`, `3.0`, `3e0`).
    case number(Double, Int?)
    case string(String)
    case array([JSONValue])
    /// Members in body order; a repeated name is allowed and the first one wins (as with `JSONDecoder`).
    case object([(String, JSONValue)])

    static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): true
        case (.bool(let x), .bool(let y)): x == y
        case (.number(let x, _), .number(let y, _)): x == y
        case (.string(let x), .string(let y)): x == y
        case (.array(let x), .array(let y)): x == y
        case (.object(let x), .object(let y)): x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    /// The member `name` of an object (the first one if repeated), or `nil`.
    subscript(_ name: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == name }?.1
    }
}

/// Why a body is not JSON, or holds a container larger than the parser accepts.
struct JSONSyntaxError: Error {
    /// Which container limit a body went over.
    enum Limit {
        /// Inside an event: more than `JSONParser.maxInnerCount` members or elements.
        case inner
        /// The envelope's `events` array: more than `JSONParser.maxEnvelopeElements` elements.
        case events
        /// Another object or array of the envelope: more than `maxInnerCount` members or `maxEnvelopeElements` elements.
        case envelope
    }

    var offset: Int
    /// Set when the body may be valid JSON but holds a container over a limit: parsing stopped there.
    var limit: Limit?
}

/// A strict RFC 8259 parser over UTF-8 bytes: no comments, no trailing commas, no leading zeros, no
/// control characters in strings, valid UTF-8 and surrogate pairs only, at most `maxDepth` nested levels.
///
/// Every object holds at most `maxInnerCount` members; an array inside an event holds as many elements, and one
/// in the envelope (the `events` array) at most `maxEnvelopeElements`. Whatever reads the values then works on
/// bounded input, and a body that goes over stops being parsed there: no shape an ingest key's holder gives a
/// body makes it cost more than its size.
struct JSONParser: ~Copyable {
    static let maxDepth = 512
    /// Most members of any object, and elements of an array at depth 3 or more (inside an event).
    static let maxInnerCount = 256
    /// Most elements of an array at depth 2 (the `events` array): `EventBatch.Limits.maxEvents`.
    static let maxEnvelopeElements = 1000

    private let bytes: UnsafeBufferPointer<UInt8>
    private var i = 0
    private var depth = 0
    /// The member of the body's object being parsed, to tell the `events` array from the envelope's others.
    private var rootMember = ""

    private init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    /// Parses a whole document (any value at the top, surrounded by whitespace only).
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws(JSONSyntaxError) -> JSONValue {
        var parser = JSONParser(bytes)
        parser.skipWhitespace()
        let value = try parser.value()
        parser.skipWhitespace()
        guard parser.i == bytes.count else { throw JSONSyntaxError(offset: parser.i) }
        return value
    }

    private var failure: JSONSyntaxError { JSONSyntaxError(offset: i) }

    private mutating func skipWhitespace() {
        while i < bytes.count {
            switch bytes[i] {
            case 0x20, 0x09, 0x0A, 0x0D: i += 1
            default: return
            }
        }
    }

    private mutating func value() throws(JSONSyntaxError) -> JSONValue {
        guard i < bytes.count else { throw failure }
        switch bytes[i] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        default: return try number()
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let count = word.utf8CodeUnitCount
        guard bytes.count - i >= count else { throw failure }
        for k in 0..<count where bytes[i + k] != word.utf8Start[k] { throw failure }
        i += count
    }

    private mutating func object() throws(JSONSyntaxError) -> JSONValue {
        depth += 1
        guard depth <= Self.maxDepth else { throw failure }
        defer { depth -= 1 }
        i += 1
        var members: [(String, JSONValue)] = []
        // An event has five to nine members: one allocation instead of four as the array grows.
        members.reserveCapacity(8)
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") {
            i += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw failure }
            let name = try string()
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw failure }
            i += 1
            skipWhitespace()
            if depth == 1 { rootMember = name }
            members.append((name, try value()))
            if members.count > Self.maxInnerCount { throw JSONSyntaxError(offset: i, limit: depth >= 3 ? .inner : .envelope) }
            skipWhitespace()
            guard i < bytes.count else { throw failure }
            if bytes[i] == UInt8(ascii: ",") {
                i += 1
                continue
            }
            guard bytes[i] == UInt8(ascii: "}") else { throw failure }
            i += 1
            return .object(members)
        }
    }

    private mutating func array() throws(JSONSyntaxError) -> JSONValue {
        depth += 1
        guard depth <= Self.maxDepth else { throw failure }
        defer { depth -= 1 }
        i += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "]") {
            i += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try value())
            if depth >= 3, elements.count > Self.maxInnerCount { throw JSONSyntaxError(offset: i, limit: .inner) }
            if elements.count > Self.maxEnvelopeElements {
                throw JSONSyntaxError(offset: i, limit: depth == 2 && rootMember == "events" ? .events : .envelope)
            }
            skipWhitespace()
            guard i < bytes.count else { throw failure }
            if bytes[i] == UInt8(ascii: ",") {
                i += 1
                continue
            }
            guard bytes[i] == UInt8(ascii: "]") else { throw failure }
            i += 1
            return .array(elements)
        }
    }

    private mutating func string() throws(JSONSyntaxError) -> String {
        i += 1
        let start = i
        // Fast path: no escapes. ASCII needs no validation (`String(validating:)` is not specialized and was
        // the top cost of decoding).
        var ascii = true
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                let raw = UnsafeBufferPointer(rebasing: bytes[start..<i])
                let text = ascii ? String(decoding: raw, as: UTF8.self) : String(validating: raw, as: UTF8.self)
                guard let text else { throw JSONSyntaxError(offset: start) }
                i += 1
                return text
            }
            ascii = ascii && b < 0x80
            if b == UInt8(ascii: "\\") { break }
            guard b >= 0x20 else { throw failure }
            i += 1
        }
        guard i < bytes.count else { throw failure }
        var out = Array(bytes[start..<i])
        while i < bytes.count {
            let b = bytes[i]
            switch b {
            case UInt8(ascii: "\""):
                i += 1
                guard let text = String(validating: out, as: UTF8.self) else { throw JSONSyntaxError(offset: start) }
                return text
            case UInt8(ascii: "\\"):
                i += 1
                guard i < bytes.count else { throw failure }
                let e = bytes[i]
                i += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"): try unicodeEscape(into: &out)
                default: throw failure
                }
            default:
                guard b >= 0x20 else { throw failure }
                out.append(b)
                i += 1
            }
        }
        throw failure
    }

    /// `\uXXXX` (after the `u`), with a following low surrogate for a high one.
    private mutating func unicodeEscape(into out: inout [UInt8]) throws(JSONSyntaxError) {
        var scalar = try hex4()
        if (0xD800...0xDBFF).contains(scalar) {
            guard bytes.count - i >= 6, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else { throw failure }
            i += 2
            let low = try hex4()
            guard (0xDC00...0xDFFF).contains(low) else { throw failure }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        } else if (0xDC00...0xDFFF).contains(scalar) {
            throw failure
        }
        guard let unicode = Unicode.Scalar(scalar) else { throw failure }
        out.append(contentsOf: UTF8.encode(unicode) ?? UTF8.EncodedScalar())
    }

    private mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        guard bytes.count - i >= 4 else { throw failure }
        var n: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[i]
            let digit: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = b - UInt8(ascii: "A") + 10
            default: throw failure
            }
            n = n << 4 | UInt32(digit)
            i += 1
        }
        return n
    }

    private mutating func number() throws(JSONSyntaxError) -> JSONValue {
        let start = i
        var negative = false
        if bytes[i] == UInt8(ascii: "-") {
            negative = true
            i += 1
        }
        guard i < bytes.count, isDigit(bytes[i]) else { throw failure }
        // Integer part, accumulated exactly while it fits.
        var magnitude: UInt64 = 0
        var exact = true
        if bytes[i] == UInt8(ascii: "0") {
            i += 1
            if i < bytes.count, isDigit(bytes[i]) { throw failure }
        } else {
            while i < bytes.count, isDigit(bytes[i]) {
                let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
                let (sum, o2) = times10.addingReportingOverflow(UInt64(bytes[i] - UInt8(ascii: "0")))
                if o1 || o2 { exact = false } else { magnitude = sum }
                i += 1
            }
        }
        var integral = true
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            integral = false
            i += 1
            guard i < bytes.count, isDigit(bytes[i]) else { throw failure }
            while i < bytes.count, isDigit(bytes[i]) { i += 1 }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            integral = false
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard i < bytes.count, isDigit(bytes[i]) else { throw failure }
            while i < bytes.count, isDigit(bytes[i]) { i += 1 }
        }
        if integral, exact {
            if !negative, magnitude <= UInt64(Int.max) { return .number(Double(magnitude), Int(magnitude)) }
            if negative, magnitude <= UInt64(Int.max) + 1 {
                let value = magnitude == UInt64(Int.max) + 1 ? Int.min : -Int(magnitude)
                return .number(Double(value), value)
            }
        }
        guard let double = Double(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)), double.isFinite else {
            throw JSONSyntaxError(offset: start)
        }
        let asInt = double.rounded() == double && abs(double) < 9.2e18 ? Int(double) : nil
        return .number(double, asInt)
    }

    private func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
}
