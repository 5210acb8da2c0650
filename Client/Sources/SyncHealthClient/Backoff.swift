/// Exponential backoff with full jitter: after the n-th failure in a row, a delay drawn uniformly between the
/// minimum and `min(maximum, minimum · 2ⁿ)`. Jitter keeps a fleet that lost the server at once from coming back
/// at once.
struct Backoff: Sendable, Equatable {
    var minimum: Duration
    var maximum: Duration
    /// Failures in a row.
    private(set) var failures = 0

    init(minimum: Duration, maximum: Duration) {
        self.minimum = minimum
        self.maximum = max(minimum, maximum)
    }

    /// Counts a failure and returns the delay before the next attempt.
    mutating func fail(using rng: inout some RandomNumberGenerator) -> Duration {
        failures += 1
        let low = minimum.seconds
        let ceiling = min(maximum.seconds, low * pow2(failures - 1))
        return .seconds(low + Double.random(in: 0...1, using: &rng) * max(0, ceiling - low))
    }

    /// A success: the next failure starts again from the minimum.
    mutating func succeed() { failures = 0 }

    private func pow2(_ n: Int) -> Double {
        n >= 62 ? .greatestFiniteMagnitude : Double(UInt64(1) << UInt64(n))
    }
}

extension Duration {
    /// The duration in (fractional) seconds.
    var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }
}
