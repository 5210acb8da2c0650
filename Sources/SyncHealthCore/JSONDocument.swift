/// A parsed JSON document over the bytes it was parsed from: a tape of nodes in body order, one per value and
/// member name, with no string made until it is read. The event decoder reads request bodies into this and
/// validates from it: one pass over the bytes, no `Codable` machinery (Foundation's `JSONDecoder` was the top
/// cost of ingestion), and no tree of values (#66: building one, with a `String` for every name and value, and
/// tearing it down cost more than reading the fields the decoder needs).
///
/// It borrows the bytes: use it only while they are valid (inside the `withUnsafeBytes` that parsed them).
struct JSONDocument {
    /// What a node holds.
    enum Kind: UInt8 {
        case null, bool, number, string, array, object
    }

    /// One value or member name.
    struct Node {
        var kind: Kind
        /// `bool`: its value. `string`: whether its text is in `texts` (it had escapes or non-ASCII bytes).
        var flag = false
        /// `string`: the first byte of its text, or its index in `texts`. `number`: its index in `numbers`.
        /// `array` and `object`: how many elements or members.
        var a: UInt32 = 0
        /// `string`: the end of its text in the bytes. `array` and `object`: the index of the first node after it.
        var b: UInt32 = 0
    }

    /// A node's index. An object's members follow it as a name node, then the value's nodes; an array's elements
    /// follow it in order.
    typealias Index = Int

    let bytes: UnsafeBufferPointer<UInt8>
    fileprivate(set) var nodes: [Node] = []
    /// Strings that had escapes or non-ASCII bytes, decoded and validated while parsing.
    fileprivate(set) var texts: [String] = []
    /// Each number as a `Double`, and as an `Int` when it is integral and fits (`3`, `3.0`, `3e0`).
    fileprivate(set) var numbers: [(double: Double, int: Int?)] = []

    /// The document's value.
    var root: Index { 0 }

    /// Parses a whole document (any value at the top, surrounded by whitespace only).
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws(JSONSyntaxError) -> JSONDocument {
        var parser = JSONParser(bytes)
        try parser.parse()
        return parser.document
    }

    func kind(_ index: Index) -> Kind { nodes[index].kind }

    func isNull(_ index: Index) -> Bool { nodes[index].kind == .null }

    /// The index of the first node after the value at `index` (and all it holds).
    func after(_ index: Index) -> Index {
        let node = nodes[index]
        return node.kind == .array || node.kind == .object ? Int(node.b) : index + 1
    }

    /// The member `name` of the object at `index` (the first one if repeated, as with `JSONDecoder`), or `nil`
    /// (also when the value is not an object).
    func member(_ index: Index, _ name: StaticString) -> Index? {
        nodes.withUnsafeBufferPointer { nodes in
            guard nodes[index].kind == .object else { return nil }
            var i = index + 1
            for _ in 0..<nodes[index].a {
                if textEquals(nodes[i], name) { return i + 1 }
                let value = nodes[i + 1]
                i = value.kind == .array || value.kind == .object ? Int(value.b) : i + 2
            }
            return nil
        }
    }

    /// The members of the object at `index`, as (name node, value node), in body order.
    func members(_ index: Index) -> [(name: Index, value: Index)] {
        guard nodes[index].kind == .object else { return [] }
        var out: [(name: Index, value: Index)] = []
        out.reserveCapacity(Int(nodes[index].a))
        var i = index + 1
        for _ in 0..<nodes[index].a {
            out.append((i, i + 1))
            i = after(i + 1)
        }
        return out
    }

    /// The elements of the array at `index`, in order (empty when it is not an array).
    func elements(_ index: Index) -> [Index] {
        guard nodes[index].kind == .array else { return [] }
        var out: [Index] = []
        out.reserveCapacity(Int(nodes[index].a))
        var i = index + 1
        for _ in 0..<nodes[index].a {
            out.append(i)
            i = after(i)
        }
        return out
    }

    /// The text of the string at `index`, or `nil` when it is not a string.
    func string(_ index: Index) -> String? {
        let node = nodes[index]
        guard node.kind == .string else { return nil }
        if node.flag { return texts[Int(node.a)] }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[Int(node.a)..<Int(node.b)]), as: UTF8.self)
    }

    /// Calls `body` with the UTF-8 of the string at `index` (without making a `String` when the body held it
    /// plainly); `nil` when it is not a string.
    func withUTF8<T>(_ index: Index, _ body: (UnsafeBufferPointer<UInt8>) -> T) -> T? {
        let node = nodes[index]
        guard node.kind == .string else { return nil }
        guard node.flag else { return body(UnsafeBufferPointer(rebasing: bytes[Int(node.a)..<Int(node.b)])) }
        var text = texts[Int(node.a)]
        return text.withUTF8(body)
    }

    /// Whether the node at `index` is a string whose text is `name`.
    func textEquals(_ index: Index, _ name: StaticString) -> Bool { textEquals(nodes[index], name) }

    /// Names are compared byte by byte where the body held them plainly (every name the decoder asks for is ASCII),
    /// as `String`s otherwise.
    private func textEquals(_ node: Node, _ name: StaticString) -> Bool {
        guard node.kind == .string else { return false }
        guard !node.flag else { return texts[Int(node.a)] == name.description }
        let count = name.utf8CodeUnitCount
        guard Int(node.b - node.a) == count, let base = bytes.baseAddress else { return Int(node.b - node.a) == count }
        let text = base + Int(node.a)
        let wanted = name.utf8Start
        for k in 0..<count where text[k] != wanted[k] { return false }
        return true
    }

    func bool(_ index: Index) -> Bool? {
        nodes[index].kind == .bool ? nodes[index].flag : nil
    }

    func number(_ index: Index) -> (double: Double, int: Int?)? {
        nodes[index].kind == .number ? numbers[Int(nodes[index].a)] : nil
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

/// A strict RFC 8259 parser over UTF-8 bytes into a `JSONDocument`: no comments, no trailing commas, no leading
/// zeros, no control characters in strings, valid UTF-8 and surrogate pairs only, at most `maxDepth` nested levels.
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
    fileprivate var document: JSONDocument
    private var i = 0
    private var depth = 0
    /// Whether the member of the body's object being parsed is `events`, to tell that array from the envelope's others.
    private var inEvents = false

    fileprivate init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
        document = JSONDocument(bytes: bytes)
    }

    fileprivate mutating func parse() throws(JSONSyntaxError) {
        // Offsets are kept in 32 bits; bodies are limited to a megabyte long before this.
        guard bytes.count < Int(UInt32.max) else { throw failure }
        // About one node every twelve bytes in a typical batch: one allocation for most bodies.
        document.nodes.reserveCapacity(bytes.count / 12 + 4)
        skipWhitespace()
        try value()
        skipWhitespace()
        guard i == bytes.count else { throw JSONSyntaxError(offset: i) }
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

    private mutating func value() throws(JSONSyntaxError) {
        guard i < bytes.count else { throw failure }
        switch bytes[i] {
        case UInt8(ascii: "{"): try object()
        case UInt8(ascii: "["): try array()
        case UInt8(ascii: "\""): try string()
        case UInt8(ascii: "t"):
            try literal("true")
            document.nodes.append(.init(kind: .bool, flag: true))
        case UInt8(ascii: "f"):
            try literal("false")
            document.nodes.append(.init(kind: .bool, flag: false))
        case UInt8(ascii: "n"):
            try literal("null")
            document.nodes.append(.init(kind: .null))
        default: try number()
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let count = word.utf8CodeUnitCount
        guard bytes.count - i >= count else { throw failure }
        for k in 0..<count where bytes[i + k] != word.utf8Start[k] { throw failure }
        i += count
    }

    /// Appends a container's node, to be completed by `complete` once its contents follow it; `nil` when `closer`
    /// follows at once (the empty container is completed already).
    private mutating func open(_ kind: JSONDocument.Kind, closer: UInt8) throws(JSONSyntaxError) -> Int? {
        depth += 1
        guard depth <= Self.maxDepth else { throw failure }
        i += 1
        document.nodes.append(.init(kind: kind))
        let index = document.nodes.count - 1
        skipWhitespace()
        guard i < bytes.count, bytes[i] == closer else { return index }
        i += 1
        complete(index, count: 0)
        return nil
    }

    private mutating func complete(_ index: Int, count: Int) {
        depth -= 1
        document.nodes[index].a = UInt32(count)
        document.nodes[index].b = UInt32(document.nodes.count)
    }

    private mutating func object() throws(JSONSyntaxError) {
        guard let index = try open(.object, closer: UInt8(ascii: "}")) else { return }
        var count = 0
        while true {
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw failure }
            try string()
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw failure }
            i += 1
            skipWhitespace()
            if depth == 1 { inEvents = document.textEquals(document.nodes.count - 1, "events") }
            try value()
            count += 1
            if count > Self.maxInnerCount { throw JSONSyntaxError(offset: i, limit: depth >= 3 ? .inner : .envelope) }
            if try closes(with: UInt8(ascii: "}")) {
                complete(index, count: count)
                return
            }
        }
    }

    /// After a member or an element: whether `closer` ends the container there (it is consumed), or a comma (also
    /// consumed) says another follows.
    private mutating func closes(with closer: UInt8) throws(JSONSyntaxError) -> Bool {
        skipWhitespace()
        guard i < bytes.count else { throw failure }
        if bytes[i] == UInt8(ascii: ",") {
            i += 1
            return false
        }
        guard bytes[i] == closer else { throw failure }
        i += 1
        return true
    }

    private mutating func array() throws(JSONSyntaxError) {
        guard let index = try open(.array, closer: UInt8(ascii: "]")) else { return }
        var count = 0
        while true {
            skipWhitespace()
            try value()
            count += 1
            if depth >= 3, count > Self.maxInnerCount { throw JSONSyntaxError(offset: i, limit: .inner) }
            if count > Self.maxEnvelopeElements {
                throw JSONSyntaxError(offset: i, limit: depth == 2 && inEvents ? .events : .envelope)
            }
            if try closes(with: UInt8(ascii: "]")) {
                complete(index, count: count)
                return
            }
        }
    }

    /// Appends a string's node. Plain ASCII stays in the bytes; any other text is validated and decoded now.
    private mutating func string() throws(JSONSyntaxError) {
        i += 1
        let start = i
        // Fast path: printable ASCII up to the closing quote, scanned with a local index (most strings of a body).
        var end = start
        while end < bytes.count {
            let b = bytes[end]
            if b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") || b < 0x20 || b >= 0x80 { break }
            end += 1
        }
        if end < bytes.count, bytes[end] == UInt8(ascii: "\"") {
            document.nodes.append(.init(kind: .string, a: UInt32(start), b: UInt32(end)))
            i = end + 1
            return
        }
        var ascii = true
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                if ascii {
                    document.nodes.append(.init(kind: .string, a: UInt32(start), b: UInt32(i)))
                } else {
                    // `String(validating:)` is not specialized: only non-ASCII text pays for it.
                    guard let text = String(validating: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self) else {
                        throw JSONSyntaxError(offset: start)
                    }
                    appendText(text)
                }
                i += 1
                return
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
                appendText(text)
                return
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

    private mutating func appendText(_ text: String) {
        document.nodes.append(.init(kind: .string, flag: true, a: UInt32(document.texts.count)))
        document.texts.append(text)
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

    private mutating func number() throws(JSONSyntaxError) {
        let value = try numberValue()
        document.nodes.append(.init(kind: .number, a: UInt32(document.numbers.count)))
        document.numbers.append(value)
    }

    private mutating func numberValue() throws(JSONSyntaxError) -> (double: Double, int: Int?) {
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
            if !negative, magnitude <= UInt64(Int.max) { return (Double(magnitude), Int(magnitude)) }
            if negative, magnitude <= UInt64(Int.max) + 1 {
                let value = magnitude == UInt64(Int.max) + 1 ? Int.min : -Int(magnitude)
                return (Double(value), value)
            }
        }
        guard let double = Double(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)), double.isFinite else {
            throw JSONSyntaxError(offset: start)
        }
        let asInt = double.rounded() == double && abs(double) < 9.2e18 ? Int(double) : nil
        return (double, asInt)
    }

    private func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
}
