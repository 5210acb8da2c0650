extension Timestamp {
    /// Parses an RFC 3339 date-time such as `2026-11-22T10:00:00.120Z` or `2026-11-22T11:00:00+01:00`.
    ///
    /// Fractional seconds of any length are accepted (kept to the microsecond). Returns `nil` for anything else.
    public init?(rfc3339 string: some StringProtocol) {
        // Parsed in place, without copying the bytes: every event's timestamps are parsed on the request path.
        // Only text without contiguous UTF-8 (a bridged string) is copied first.
        let parsed =
            string.utf8.withContiguousStorageIfAvailable { Self.rfc3339Microseconds($0) }
            ?? {
                var text = String(string)
                return text.withUTF8 { Self.rfc3339Microseconds($0) }
            }()
        guard let microseconds = parsed else { return nil }
        self.init(microseconds: microseconds)
    }

    /// Parses an RFC 3339 date-time from its UTF-8, as `init?(rfc3339:)` does: for a decoder that reads it from a
    /// buffer, without making a `String` of it first.
    public init?(rfc3339UTF8 utf8: UnsafeBufferPointer<UInt8>) {
        guard let microseconds = Self.rfc3339Microseconds(utf8) else { return nil }
        self.init(microseconds: microseconds)
    }

    /// The microseconds `utf8` (an RFC 3339 date-time) stands for, or `nil`.
    static func rfc3339Microseconds(_ utf8: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard utf8.count >= 20, utf8.count <= 64 else { return nil }
        // Accept lowercase 't' and 'z' as RFC 3339 allows.
        func at(_ i: Int) -> UInt8 {
            let c = utf8[i]
            return c == UInt8(ascii: "t") || c == UInt8(ascii: "z") ? c - 32 : c
        }
        func digits(_ start: Int, _ count: Int) -> Int? {
            guard start + count <= utf8.count else { return nil }
            var value = 0
            for i in start..<(start + count) {
                let c = at(i)
                guard c >= 48, c <= 57 else { return nil }
                value = value * 10 + Int(c - 48)
            }
            return value
        }
        guard let year = digits(0, 4), at(4) == UInt8(ascii: "-"),
            let month = digits(5, 2), at(7) == UInt8(ascii: "-"),
            let day = digits(8, 2), at(10) == UInt8(ascii: "T") || at(10) == UInt8(ascii: " "),
            let hour = digits(11, 2), at(13) == UInt8(ascii: ":"),
            let minute = digits(14, 2), at(16) == UInt8(ascii: ":"),
            let second = digits(17, 2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= Self.daysInMonth(year: year, month: month),
            hour <= 23, minute <= 59, second <= 60
        else { return nil }
        var index = 19
        var micros = 0
        if index < utf8.count, at(index) == UInt8(ascii: ".") {
            index += 1
            var scale = 100_000
            let start = index
            while index < utf8.count, at(index) >= 48, at(index) <= 57 {
                micros += Int(at(index) - 48) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        guard index < utf8.count else { return nil }
        var offsetSeconds = 0
        switch at(index) {
        case UInt8(ascii: "Z"):
            index += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            let sign = at(index) == UInt8(ascii: "+") ? 1 : -1
            guard let oh = digits(index + 1, 2), index + 3 < utf8.count, at(index + 3) == UInt8(ascii: ":"),
                let om = digits(index + 4, 2), oh <= 23, om <= 59
            else { return nil }
            offsetSeconds = sign * (oh * 3600 + om * 60)
            index += 6
        default:
            return nil
        }
        guard index == utf8.count else { return nil }
        let days = Self.daysFromCivil(year: year, month: month, day: day)
        let secs = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + min(second, 59)) - Int64(offsetSeconds)
        return secs * 1_000_000 + Int64(micros)
    }

    /// The RFC 3339 form in UTC, with milliseconds or microseconds when the value has them.
    public var rfc3339: String {
        let micros = microseconds
        var secs = micros / 1_000_000
        var frac = micros % 1_000_000
        if frac < 0 {
            frac += 1_000_000
            secs -= 1
        }
        var days = secs / 86_400
        var rem = secs % 86_400
        if rem < 0 {
            rem += 86_400
            days -= 1
        }
        let (y, m, d) = Self.civilFromDays(days)
        var out = [UInt8]()
        out.reserveCapacity(27)
        func put(_ value: Int64, _ width: Int) {
            var digits = [UInt8](repeating: 48, count: width)
            var v = value < 0 ? -value : value
            var i = width - 1
            while i >= 0 {
                digits[i] = UInt8(48 + v % 10)
                v /= 10
                i -= 1
            }
            out.append(contentsOf: digits)
        }
        put(y, 4)
        out.append(UInt8(ascii: "-"))
        put(m, 2)
        out.append(UInt8(ascii: "-"))
        put(d, 2)
        out.append(UInt8(ascii: "T"))
        put(rem / 3600, 2)
        out.append(UInt8(ascii: ":"))
        put(rem % 3600 / 60, 2)
        out.append(UInt8(ascii: ":"))
        put(rem % 60, 2)
        if frac != 0 {
            out.append(UInt8(ascii: "."))
            if frac % 1000 == 0 { put(frac / 1000, 3) } else { put(frac, 6) }
        }
        out.append(UInt8(ascii: "Z"))
        return String(decoding: out, as: UTF8.self)
    }

    static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civilFromDays(_ days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? yoe + era * 400 + 1 : yoe + era * 400, m, d)
    }
}
