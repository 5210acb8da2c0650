/// One CBOR data item (RFC 8949), of the kinds App Attest's objects use.
///
/// App Attest sends two small CBOR documents: the attestation object (a map of `fmt`, `attStmt` and `authData`) and
/// each assertion (a map of `signature` and `authenticatorData`). Both are definite-length, untagged and a few
/// kilobytes at most, so a reader of definite-length items is all the service needs: indefinite lengths, tags and
/// floats are refused rather than half-supported (docs/architecture.md, "App Attest").
public enum CBORValue: Sendable, Hashable {
    case unsigned(UInt64)
    /// A negative integer, stored as CBOR does: the value is `-1 - n`.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBORValue])
    /// Pairs in the order they were written; a key written twice is refused when reading.
    case map([(CBORValue, CBORValue)])
    case bool(Bool)
    case null

    public static func == (lhs: CBORValue, rhs: CBORValue) -> Bool {
        switch (lhs, rhs) {
        case (.unsigned(let a), .unsigned(let b)), (.negative(let a), .negative(let b)): a == b
        case (.bytes(let a), .bytes(let b)): a == b
        case (.text(let a), .text(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.map(let a), .map(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case (.bool(let a), .bool(let b)): a == b
        case (.null, .null): true
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .unsigned(let v):
            hasher.combine(0)
            hasher.combine(v)
        case .negative(let v):
            hasher.combine(1)
            hasher.combine(v)
        case .bytes(let v):
            hasher.combine(2)
            hasher.combine(v)
        case .text(let v):
            hasher.combine(3)
            hasher.combine(v)
        case .array(let v):
            hasher.combine(4)
            hasher.combine(v)
        case .map(let pairs):
            hasher.combine(5)
            for (k, v) in pairs {
                hasher.combine(k)
                hasher.combine(v)
            }
        case .bool(let v):
            hasher.combine(6)
            hasher.combine(v)
        case .null: hasher.combine(7)
        }
    }

    /// The value under a text key of a map; `nil` when this is not a map or has no such key.
    public subscript(key: String) -> CBORValue? {
        guard case .map(let pairs) = self else { return nil }
        return pairs.first { $0.0 == .text(key) }?.1
    }

    /// The bytes of a byte string; `nil` for any other kind.
    public var byteString: [UInt8]? {
        if case .bytes(let b) = self { return b }
        return nil
    }
}

/// Why a CBOR document was refused.
public struct CBORError: Error, Sendable, Hashable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

extension CBORValue {
    /// The deepest nesting read: App Attest's objects nest three deep; anything far deeper is not one of them, and a
    /// bound keeps a hostile document from exhausting the stack.
    public static let maximumDepth = 16

    /// Reads exactly one data item that fills `bytes`.
    public static func decode(_ bytes: some Collection<UInt8>, maximumDepth: Int = maximumDepth) throws(CBORError) -> CBORValue {
        let (value, length) = try decodePrefix(bytes, maximumDepth: maximumDepth)
        guard length == bytes.count else { throw CBORError("bytes follow the CBOR item") }
        return value
    }

    /// Reads one data item from the start of `bytes`; returns it and how many bytes it took. For the authenticator
    /// data, where a CBOR map (the COSE key, the extensions) is followed by more bytes.
    public static func decodePrefix(
        _ bytes: some Collection<UInt8>,
        maximumDepth: Int = maximumDepth
    ) throws(CBORError) -> (value: CBORValue, length: Int) {
        var reader = CBORReader(bytes: Array(bytes), maximumDepth: maximumDepth)
        let value = try reader.item(depth: 0)
        return (value, reader.offset)
    }

    /// Writes this item in CBOR's definite-length form (preferred serialisation of lengths): for tests and for
    /// the device's software signer, which make the documents the service reads.
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        write(into: &out)
        return out
    }

    private func write(into out: inout [UInt8]) {
        func head(_ major: UInt8, _ value: UInt64) {
            let m = major << 5
            switch value {
            case ..<24: out.append(m | UInt8(value))
            case ..<0x100: out += [m | 24, UInt8(value)]
            case ..<0x1_0000: out += [m | 25] + (0..<2).reversed().map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) }
            case ..<0x1_0000_0000: out += [m | 26] + (0..<4).reversed().map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) }
            default: out += [m | 27] + (0..<8).reversed().map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) }
            }
        }
        switch self {
        case .unsigned(let v): head(0, v)
        case .negative(let v): head(1, v)
        case .bytes(let b):
            head(2, UInt64(b.count))
            out += b
        case .text(let s):
            head(3, UInt64(s.utf8.count))
            out += s.utf8
        case .array(let items):
            head(4, UInt64(items.count))
            for item in items { item.write(into: &out) }
        case .map(let pairs):
            head(5, UInt64(pairs.count))
            for (k, v) in pairs {
                k.write(into: &out)
                v.write(into: &out)
            }
        case .bool(let b): out.append(b ? 0xF5 : 0xF4)
        case .null: out.append(0xF6)
        }
    }
}

/// A cursor over a CBOR document. Every length is checked against what is left before anything is allocated, so a
/// document claiming a gigabyte costs nothing.
private struct CBORReader {
    let bytes: [UInt8]
    let maximumDepth: Int
    var offset = 0

    mutating func byte() throws(CBORError) -> UInt8 {
        guard offset < bytes.count else { throw CBORError("the CBOR item is truncated") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func argument(_ info: UInt8) throws(CBORError) -> UInt64 {
        switch info {
        case 0..<24: return UInt64(info)
        case 24, 25, 26, 27:
            let count = 1 << Int(info - 24)
            var value: UInt64 = 0
            for _ in 0..<count { value = value << 8 | UInt64(try byte()) }
            return value
        default:
            throw CBORError("indefinite lengths and reserved values are not read")
        }
    }

    mutating func take(_ length: UInt64) throws(CBORError) -> ArraySlice<UInt8> {
        guard length <= UInt64(bytes.count - offset) else { throw CBORError("a length runs past the end of the CBOR item") }
        let end = offset + Int(length)
        defer { offset = end }
        return bytes[offset..<end]
    }

    mutating func item(depth: Int) throws(CBORError) -> CBORValue {
        guard depth <= maximumDepth else { throw CBORError("the CBOR item nests too deep") }
        let initial = try byte()
        let major = initial >> 5
        let info = initial & 0x1F
        if major == 7 {
            switch info {
            case 20: return .bool(false)
            case 21: return .bool(true)
            case 22: return .null
            default: throw CBORError("floats and simple values other than true, false and null are not read")
            }
        }
        let argument = try argument(info)
        switch major {
        case 0: return .unsigned(argument)
        case 1: return .negative(argument)
        case 2: return .bytes(Array(try take(argument)))
        case 3:
            let slice = try take(argument)
            guard let text = String(validating: slice, as: UTF8.self) else { throw CBORError("a text string is not UTF-8") }
            return .text(text)
        case 4:
            // Each item is at least one byte: a count beyond what is left cannot be honest.
            guard argument <= UInt64(bytes.count - offset) else { throw CBORError("an array claims more items than bytes") }
            var items: [CBORValue] = []
            items.reserveCapacity(Int(argument))
            for _ in 0..<argument { items.append(try item(depth: depth + 1)) }
            return .array(items)
        case 5:
            guard argument <= UInt64(bytes.count - offset) / 2 else { throw CBORError("a map claims more pairs than bytes") }
            var pairs: [(CBORValue, CBORValue)] = []
            pairs.reserveCapacity(Int(argument))
            // A set, not a scan of the pairs so far: a hostile map of n pairs costs n look-ups, not n²/2 comparisons.
            var keys = Set<CBORValue>(minimumCapacity: Int(argument))
            for _ in 0..<argument {
                let key = try item(depth: depth + 1)
                guard keys.insert(key).inserted else { throw CBORError("a map repeats a key") }
                pairs.append((key, try item(depth: depth + 1)))
            }
            return .map(pairs)
        default:
            throw CBORError("tagged items are not read")
        }
    }
}
