import PostgresNIO
public import SyncHealthCore
public import SyncHealthStore

extension PostgresStore {
    public func webhooks() async throws -> [WebhookSubscription] {
        var all: [WebhookSubscription] = []
        let rows = try await run(
            """
            SELECT id, url, kinds, description, secret, created_at, disabled_reason, options FROM webhooks ORDER BY created_at, id
            """,
            logger: logger
        )
        for try await (id, url, kinds, description, secret, createdAt, disabled, options) in rows.decode(
            (String, String, String, String?, String, Int64, String?, String).self
        ) {
            var subscription = WebhookSubscription(
                id: id,
                url: url,
                kinds: kinds.split(separator: ",").compactMap { AlertKind(rawValue: String($0)) },
                description: description,
                secret: secret,
                createdAt: Timestamp(microseconds: createdAt),
                disabledReason: disabled
            )
            subscription.apply(optionsJSON: options)
            all.append(subscription)
        }
        return all
    }

    public func saveWebhook(_ w: WebhookSubscription) async throws {
        try await run(
            """
            INSERT INTO webhooks (id, url, kinds, description, secret, created_at, disabled_reason, options)
            VALUES (\(w.id), \(w.url), \(w.kinds.map(\.rawValue).joined(separator: ",")), \(w.description), \(w.secret),
                    \(w.createdAt.microseconds), \(w.disabledReason), \(w.optionsJSON))
            ON CONFLICT (id) DO UPDATE SET url = excluded.url, kinds = excluded.kinds, description = excluded.description,
                secret = excluded.secret, created_at = excluded.created_at, disabled_reason = excluded.disabled_reason,
                options = excluded.options
            """,
            logger: logger
        )
    }

    public func deleteWebhook(id: String) async throws -> Bool {
        try await withTransaction { connection in
            var existed = false
            for try await _ in try await connection.query("DELETE FROM webhooks WHERE id = \(id) RETURNING id", logger: logger).decode(String.self) {
                existed = true
            }
            try await connection.query("DELETE FROM outbox WHERE webhook_id = \(id)", logger: logger)
            try await connection.query("DELETE FROM deliveries WHERE webhook_id = \(id)", logger: logger)
            return existed
        }
    }

    /// Claims the due messages for `deliveryLease`: another replica skips them until the lease runs out or
    /// an attempt is recorded. A replica that dies mid-send leaves its messages to the others after the lease.
    public func dueMessages(now: Timestamp, limit: Int) async throws -> [OutboxMessage] {
        let leaseUntil = (now + deliveryLease).microseconds
        let rows = try await run(
            """
            UPDATE outbox SET lease_until = \(leaseUntil) WHERE seq IN (
                SELECT o.seq FROM outbox o
                WHERE o.state = 'pending' AND o.next_attempt_at <= \(now.microseconds)
                  AND (o.lease_until IS NULL OR o.lease_until <= \(now.microseconds))
                  AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.webhook_id = o.webhook_id AND p.ordering_key = o.ordering_key AND p.seq < o.seq)
                ORDER BY o.seq LIMIT \(limit)
                FOR UPDATE SKIP LOCKED)
            RETURNING seq, id, webhook_id, ordering_key, payload, created_at, attempts, next_attempt_at, state
            """,
            logger: logger
        )
        var claimed: [(Int64, OutboxMessage)] = []
        for try await row in rows.decode((Int64, String, String, String, String, Int64, Int, Int64, String).self) {
            claimed.append(
                (
                    row.0,
                    OutboxMessage(
                        id: row.1,
                        webhookId: row.2,
                        orderingKey: OutboxLine(storageKey: row.3),
                        payload: row.4,
                        createdAt: Timestamp(microseconds: row.5),
                        attempts: row.6,
                        nextAttemptAt: Timestamp(microseconds: row.7),
                        state: OutboxMessage.State(rawValue: row.8) ?? .failed
                    )
                )
            )
        }
        return claimed.sorted { $0.0 < $1.0 }.map(\.1)
    }

    public func nextDueTime() async throws -> Timestamp? {
        for try await due in try await run(
            """
            SELECT MIN(GREATEST(next_attempt_at, COALESCE(lease_until, 0))) FROM outbox WHERE state = 'pending'
            """,
            logger: logger
        ).decode(Int64?.self) {
            return due.map(Timestamp.init(microseconds:))
        }
        return nil
    }

    public func recordAttempt(_ a: DeliveryAttempt, disable reason: String?) async throws {
        try await withTransaction { connection in
            try await connection.query(
                """
                INSERT INTO deliveries (webhook_id, message_id, attempt, attempted_at, status_code, error, next_retry_at, outcome)
                VALUES (\(a.webhookId), \(a.messageId), \(a.attempt), \(a.attemptedAt.microseconds), \(a.statusCode), \(a.error),
                        \(a.nextRetryAt?.microseconds), \(a.outcome.rawValue))
                """,
                logger: logger
            )
            switch a.outcome {
            case .delivered:
                try await connection.query("DELETE FROM outbox WHERE id = \(a.messageId)", logger: logger)
            case .retrying:
                try await connection.query(
                    """
                    UPDATE outbox SET attempts = \(a.attempt), next_attempt_at = \(a.nextRetryAt?.microseconds ?? a.attemptedAt.microseconds),
                        lease_until = NULL WHERE id = \(a.messageId)
                    """,
                    logger: logger
                )
            case .failed, .disabled:
                try await connection.query(
                    "UPDATE outbox SET attempts = \(a.attempt), state = 'failed', lease_until = NULL WHERE id = \(a.messageId)",
                    logger: logger
                )
            }
            if let reason {
                try await connection.query("UPDATE webhooks SET disabled_reason = \(reason) WHERE id = \(a.webhookId)", logger: logger)
            }
        }
    }

    public func deliveries(webhookId: String, limit: Int, before cursor: Int64?) async throws -> (attempts: [DeliveryAttempt], nextCursor: Int64?) {
        let rows = try await run(
            """
            SELECT seq, webhook_id, message_id, attempt, attempted_at, status_code, error, next_retry_at, outcome FROM deliveries
            WHERE webhook_id = \(webhookId) AND seq < \(cursor ?? Int64.max) ORDER BY seq DESC LIMIT \(limit + 1)
            """,
            logger: logger
        )
        var attempts: [DeliveryAttempt] = []
        for try await row in rows.decode((Int64, String, String, Int, Int64, Int?, String?, Int64?, String).self) {
            attempts.append(
                DeliveryAttempt(
                    seq: row.0,
                    webhookId: row.1,
                    messageId: row.2,
                    attempt: row.3,
                    attemptedAt: Timestamp(microseconds: row.4),
                    statusCode: row.5,
                    error: row.6,
                    nextRetryAt: row.7.map(Timestamp.init(microseconds:)),
                    outcome: DeliveryAttempt.Outcome(rawValue: row.8) ?? .failed
                )
            )
        }
        guard attempts.count > limit else { return (attempts, nil) }
        let page = Array(attempts.prefix(limit))
        return (page, page.last?.seq)
    }

    public func resend(webhookId: String, messageId: String, now: Timestamp) async throws -> Bool {
        var found = false
        for try await _ in try await run(
            """
            UPDATE outbox SET state = 'pending', attempts = 0, next_attempt_at = \(now.microseconds), lease_until = NULL
            WHERE id = \(messageId) AND webhook_id = \(webhookId) AND state = 'failed' RETURNING id
            """,
            logger: logger
        ).decode(String.self) {
            found = true
        }
        return found
    }
}
