/// Makes UUIDv7 event ids (RFC 9562): a millisecond timestamp, then a counter for ids of the same millisecond,
/// then random bits. Ids only grow, even if the wall clock steps back, so that the server's deduplication, the
/// queue's order and the order of the ids agree; the lowercase text form sorts as the ids do.
struct EventIdGenerator {
    private var lastMillis: UInt64 = 0
    private var counter: UInt16 = 0

    /// A generator whose ids all sort after `after` (the last id stored by an earlier launch), if given.
    init(after: String? = nil) {
        if let after, let millis = Self.millis(of: after) {
            lastMillis = millis
            counter = 0xFFF  // the next id moves to the next millisecond
        }
    }

    /// The next id, for a wall-clock time of `unixMillis`.
    mutating func next(unixMillis: UInt64) -> String {
        var rng = SystemRandomNumberGenerator()
        return next(unixMillis: unixMillis, using: &rng)
    }

    mutating func next(unixMillis: UInt64, using rng: inout some RandomNumberGenerator) -> String {
        if unixMillis > lastMillis {
            lastMillis = unixMillis
            counter = 0
        } else if counter < 0xFFF {
            counter += 1
        } else {
            lastMillis += 1
            counter = 0
        }
        let high = (lastMillis << 16) | 0x7000 | UInt64(counter)  // 48 bits of time, version 7, 12 bits of counter
        let low = (rng.next() & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000  // variant 10, 62 random bits
        return Self.format(high: high, low: low)
    }

    /// The 8-4-4-4-12 lowercase text form.
    static func format(high: UInt64, low: UInt64) -> String {
        func hex(_ value: UInt64, digits: Int) -> String {
            let s = String(value, radix: 16)
            return String(repeating: "0", count: max(0, digits - s.count)) + s
        }
        return hex(high >> 32, digits: 8) + "-" + hex((high >> 16) & 0xFFFF, digits: 4) + "-" + hex(high & 0xFFFF, digits: 4) + "-"
            + hex(low >> 48, digits: 4) + "-" + hex(low & 0xFFFF_FFFF_FFFF, digits: 12)
    }

    /// The millisecond timestamp of a UUIDv7 text, or `nil` for anything else.
    static func millis(of id: String) -> UInt64? {
        let hex = id.filter { $0 != "-" }
        guard hex.count == 32, let first = UInt64(hex.prefix(12), radix: 16) else { return nil }
        return first
    }
}
