/// A point in time, in whole microseconds since 1970-01-01T00:00:00Z.
///
/// The domain never reads a clock: every `Timestamp` it sees was passed in.
public struct Timestamp: Hashable, Comparable, Sendable {
    /// Microseconds since the Unix epoch.
    public var microseconds: Int64

    /// Creates a timestamp from microseconds since the Unix epoch.
    @inlinable
    public init(microseconds: Int64) {
        self.microseconds = microseconds
    }

    /// Creates a timestamp from (possibly fractional) seconds since the Unix epoch.
    public init(seconds: Double) {
        let micros = (seconds * 1_000_000).rounded()
        if micros.isNaN {
            self.microseconds = 0
        } else if micros >= Double(Int64.max) {
            self.microseconds = .max
        } else if micros <= Double(Int64.min) {
            self.microseconds = .min
        } else {
            self.microseconds = Int64(micros)
        }
    }

    /// Seconds since the Unix epoch.
    public var seconds: Double { Double(microseconds) / 1_000_000 }

    /// Whole seconds since the Unix epoch (rounded down).
    public var unixSeconds: Int64 { microseconds >= 0 ? microseconds / 1_000_000 : (microseconds - 999_999) / 1_000_000 }

    @inlinable
    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool { lhs.microseconds < rhs.microseconds }

    /// The timestamp `duration` later, saturating instead of overflowing.
    @inlinable
    public static func + (lhs: Timestamp, rhs: Duration) -> Timestamp {
        Timestamp(microseconds: lhs.microseconds.addingSaturated(rhs.microseconds))
    }

    /// The timestamp `duration` earlier, saturating instead of overflowing.
    @inlinable
    public static func - (lhs: Timestamp, rhs: Duration) -> Timestamp {
        Timestamp(microseconds: lhs.microseconds.addingSaturated(0 &- rhs.microseconds))
    }

    /// The time from `rhs` to `lhs`.
    @inlinable
    public static func - (lhs: Timestamp, rhs: Timestamp) -> Duration {
        .microseconds(lhs.microseconds.addingSaturated(0 &- rhs.microseconds))
    }
}

extension Int64 {
    /// `self + other`, clamped to the representable range.
    @inlinable
    func addingSaturated(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        if !overflow { return sum }
        return other > 0 ? .max : .min
    }
}

extension Duration {
    /// The duration in whole microseconds (saturating).
    @inlinable
    public var microseconds: Int64 {
        let (seconds, attoseconds) = components
        let (micros, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000)
        if overflow { return seconds > 0 ? .max : .min }
        return micros.addingSaturated(attoseconds / 1_000_000_000_000)
    }

    /// The duration in (fractional) seconds.
    public var secondsValue: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

/// Stores an optional timestamp in 8 bytes instead of 16 (`nil` is `Int64.min`, a time no input can produce),
/// which keeps a device's state small. Reads and writes like a plain `Timestamp?`.
@propertyWrapper
public struct PackedTimestamp: Hashable, Sendable {
    @usableFromInline var raw: Int64

    /// Wraps `wrappedValue`.
    @inlinable
    public init(wrappedValue: Timestamp?) {
        raw = wrappedValue?.microseconds ?? .min
    }

    /// The timestamp, or `nil`.
    @inlinable
    public var wrappedValue: Timestamp? {
        get { raw == .min ? nil : Timestamp(microseconds: raw) }
        set { raw = newValue.map { max($0.microseconds, .min + 1) } ?? .min }
    }
}
