/// How `OutboxSender` delivers: when it tries again, how many messages at once, the longest `Retry-After` it
/// honours, and which addresses a receiver may have (`WebhookCenter` checks a new subscription's URL against the
/// same rule).
public struct DeliveryConfiguration: Sendable {
    /// Delay before each attempt: the first is immediate. When it is exhausted, the message is kept as failed.
    public var retrySchedule: [Duration] = [
        .zero, .seconds(5), .seconds(300), .seconds(1800), .seconds(7200),
        .seconds(18_000), .seconds(36_000), .seconds(36_000),
    ]
    /// Random spread applied to each retry delay (0.1 = ±10%).
    public var jitter: Double = 0.1
    /// Whether receivers may be on loopback or private addresses.
    public var allowPrivate = false
    /// Deliveries in flight at once.
    public var concurrency = 8
    /// Longest `Retry-After` honoured.
    public var maxRetryAfter: Duration = .seconds(86_400)

    /// The defaults.
    public init() {}
}
