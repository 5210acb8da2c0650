public import SyncHealthWebhooks
public import Synchronization

/// A webhook transport that answers 200 and keeps what it was asked to send: for tests of what the service
/// delivers, without a receiver.
public final class RecordingTransport: WebhookTransport {
    /// Every request asked for, in order.
    public let sent = Mutex<[WebhookRequest]>([])

    /// An empty recording.
    public init() {}

    public func send(_ request: WebhookRequest) async -> WebhookResponse {
        sent.withLock { $0.append(request) }
        return .status(200, retryAfter: nil)
    }
}
