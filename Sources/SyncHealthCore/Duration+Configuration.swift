extension Duration {
    /// Parses a configuration duration: `90s`, `15m`, `2h`, `1d`, `250ms`, or a plain number of seconds (`0.5`).
    public init?(configuration text: String) {
        let trimmed = text.trimmingWhitespace()
        guard !trimmed.isEmpty else { return nil }
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
        var number = Substring(trimmed)
        var multiplier = 1.0
        for (suffix, factor) in units where trimmed.hasSuffix(suffix) {
            number = trimmed.dropLast(suffix.count)
            multiplier = factor
            break
        }
        guard let value = Double(number), value.isFinite, value >= 0 else { return nil }
        let seconds = value * multiplier
        guard seconds < 1e12 else { return nil }
        self = .microseconds(Int64((seconds * 1_000_000).rounded()))
    }
}

extension String {
    /// The string without leading and trailing whitespace (no Foundation needed).
    public func trimmingWhitespace() -> String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s.removeFirst() }
        while let l = s.last, l.isWhitespace { s.removeLast() }
        return String(s)
    }
}

extension Duration {
    /// The duration as a configuration writes it, in the largest unit that keeps it whole (`90s`, `15m`, `24h`,
    /// `250ms`), so that `Duration(configuration:)` reads it back as it was.
    public var configurationText: String {
        let (seconds, attoseconds) = components
        let microseconds = seconds * 1_000_000 + attoseconds / 1_000_000_000_000
        if microseconds == 0 { return "0" }
        for (suffix, unit) in [("h", Int64(3_600_000_000)), ("m", 60_000_000), ("s", 1_000_000), ("ms", 1_000)]
        where microseconds % unit == 0 {
            return "\(microseconds / unit)\(suffix)"
        }
        return "\(Double(microseconds) / 1_000_000)"
    }
}
