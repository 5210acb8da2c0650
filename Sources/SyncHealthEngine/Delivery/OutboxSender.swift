import Foundation
public import Logging
import Metrics
public import ServiceLifecycle
import SyncHealthCore
public import SyncHealthStore
public import SyncHealthWebhooks
import Synchronization

/// Sends the outbox: the messages the engine wrote in the same transaction as the alert transitions that cause
/// them, signed, through the transport, each deleted only after a 2xx; retries on a schedule, honours `Retry-After`,
/// and disables a subscription whose receiver answers 410. Which subscriptions exist is `WebhookCenter`'s.
public final class OutboxSender: Service, Sendable {
    let webhooks: WebhookCenter
    let store: any SyncStore
    let transport: any WebhookTransport
    let clock: any ServiceClock
    let configuration: DeliveryConfiguration
    let logger: Logger
    /// Set by graceful shutdown: the loop starts no more deliveries.
    let stopping = Atomic<Bool>(false)
    let attempts = Counter(label: "synchealth_webhook_attempts_total")
    let delivered = Counter(label: "synchealth_webhook_delivered_total")
    let failed = Counter(label: "synchealth_webhook_failed_total")
    /// Signalled when messages may be waiting (a commit wrote some, one is scheduled again): the loop waits on it.
    let wake = WakeSignal()

    /// Creates the sender of `webhooks`' messages in `store`.
    public init(
        webhooks: WebhookCenter,
        store: any SyncStore,
        transport: any WebhookTransport,
        clock: any ServiceClock,
        configuration: DeliveryConfiguration,
        logger: Logger
    ) {
        self.webhooks = webhooks
        self.store = store
        self.transport = transport
        self.clock = clock
        self.configuration = configuration
        self.logger = logger
    }

    /// Delivers until graceful shutdown; it starts once the engine has loaded the subscriptions (a shared store is
    /// migrated then). Shutdown stops the loop between batches, not within one: the batch claimed
    /// is delivered and recorded (cancelling a delivery the receiver took would send it again after a restart; one
    /// left claimed would wait for its lease on another replica).
    public func run() async throws {
        await withGracefulShutdownHandler {
            while !self.webhooks.loaded.load(ordering: .acquiring) {
                if Task.isCancelled || self.stopping.load(ordering: .acquiring) { return }
                await self.webhooks.loadedSignal.wait()
            }
            await self.loop()
        } onGracefulShutdown: {
            self.stopping.store(true, ordering: .releasing)
            self.wake.signal()
            self.webhooks.loadedSignal.signal()
        }
    }

    /// Tells the sender that new messages are waiting.
    public func notify() { wake.signal() }

    func loop() async {
        while !Task.isCancelled, !stopping.load(ordering: .acquiring) {
            let now = clock.now
            let due: [OutboxMessage]
            do {
                try await webhooks.refreshIfShared()
                due = try await store.dueMessages(now: now, limit: configuration.concurrency * 4)
            } catch {
                // Cancellation ends a read under way: that ends the loop, and is not a failure.
                if Task.isCancelled { return }
                logger.error("Reading the webhook outbox failed", metadata: ["error": "\(error)"])
                await wake.wait(until: now + .seconds(1), clock: clock)
                continue
            }
            if due.isEmpty {
                let next = (try? await store.nextDueTime()) ?? nil
                await wake.wait(until: next ?? now + .seconds(60), clock: clock)
                continue
            }
            await withTaskGroup(of: Void.self) { group in
                var running = 0
                for message in due {
                    if running == configuration.concurrency {
                        await group.next()
                        running -= 1
                    }
                    group.addTask { await self.deliver(message) }
                    running += 1
                }
            }
        }
    }

    /// One attempt at one message, and its record in the log.
    func deliver(_ message: OutboxMessage) async {
        let attemptNumber = message.attempts + 1
        let now = clock.now
        attempts.increment()
        let body = Array(message.payload.utf8)
        guard let subscription = webhooks.subscription(message.webhookId), subscription.disabledReason == nil,
            let (url, headers) = subscription.format.alertFormat.target(subscription, messageId: message.id, body: body, now: now)
        else {
            await record(
                DeliveryAttempt(
                    webhookId: message.webhookId,
                    messageId: message.id,
                    attempt: attemptNumber,
                    attemptedAt: now,
                    statusCode: nil,
                    error: "the subscription is disabled or gone",
                    nextRetryAt: nil,
                    outcome: .failed
                )
            )
            return
        }
        let response = await send(url: url, headers: headers, body: body)
        var attempt = DeliveryAttempt(
            webhookId: message.webhookId,
            messageId: message.id,
            attempt: attemptNumber,
            attemptedAt: now,
            statusCode: nil,
            error: nil,
            nextRetryAt: nil,
            outcome: .retrying
        )
        var disable: String?
        var retryAfter: Duration?
        switch response {
        case .status(let code, let header):
            attempt.statusCode = code
            switch code {
            case 200...299:
                attempt.outcome = .delivered
            case 410:
                attempt.outcome = .disabled
                attempt.error = "the receiver answered 410 Gone; the subscription is disabled"
                disable = "the receiver answered 410 Gone"
            default:
                attempt.error = (300...399).contains(code) ? "redirects are not followed" : "the receiver answered \(code)"
                if code == 429 || code == 503 { retryAfter = header.flatMap { Self.parseRetryAfter($0, now: now) } }
            }
        case .failure(let error):
            attempt.error = error
        }
        if attempt.outcome == .retrying {
            if attemptNumber < configuration.retrySchedule.count {
                let planned = jittered(configuration.retrySchedule[attemptNumber])
                let wait = retryAfter.map { min(max($0, planned), configuration.maxRetryAfter) } ?? planned
                attempt.nextRetryAt = now + wait
            } else {
                attempt.outcome = .failed
            }
        }
        switch attempt.outcome {
        case .delivered: delivered.increment()
        case .failed, .disabled: failed.increment()
        case .retrying: break
        }
        logger.debug(
            "Webhook attempt",
            metadata: [
                "webhook.id": "\(message.webhookId)", "message.id": "\(message.id)",
                "attempt": "\(attemptNumber)", "outcome": "\(attempt.outcome.rawValue)",
            ]
        )
        await record(attempt, disable: disable)
    }

    /// One request through the transport, after the SSRF guard has checked the address again (the host may resolve
    /// elsewhere now; curl connects to the checked address).
    func send(url: String, headers: [(name: String, value: String)], body: [UInt8]) async -> WebhookResponse {
        do {
            let target = try AddressGuard(allowPrivate: configuration.allowPrivate).check(url)
            // The URL as libcurl parses it, its host in ASCII: the pin names the host libcurl looks up.
            return await transport.send(WebhookRequest(url: target.url.text, headers: headers, body: body, pinnedAddress: target.address))
        } catch {
            return .failure("refused by the SSRF guard: \(error.description)")
        }
    }

    func record(_ attempt: DeliveryAttempt, disable: String? = nil) async {
        do {
            try await store.recordAttempt(attempt, disable: disable)
            if let disable {
                webhooks.disabled(attempt.webhookId, reason: disable)
                logger.warning("Webhook subscription disabled", metadata: ["webhook.id": "\(attempt.webhookId)", "reason": "\(disable)"])
            }
        } catch {
            // The attempt is not recorded, so the message stays due and is tried again: at least once.
            logger.error("Recording a webhook attempt failed", metadata: ["error": "\(error)"])
        }
    }

    func jittered(_ delay: Duration) -> Duration {
        guard delay > .zero, configuration.jitter > 0 else { return delay }
        let factor = Double.random(in: (1 - configuration.jitter)...(1 + configuration.jitter))
        return .microseconds(Int64(Double(delay.microseconds) * factor))
    }

    /// `Retry-After` as seconds or an HTTP date.
    static func parseRetryAfter(_ value: String, now: Timestamp) -> Duration? {
        if let seconds = Int(value.trimmingCharacters(in: .whitespaces)), seconds >= 0 { return .seconds(seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: value) else { return nil }
        let wait = Timestamp(seconds: date.timeIntervalSince1970) - now
        return wait > .zero ? wait : .zero
    }
}
