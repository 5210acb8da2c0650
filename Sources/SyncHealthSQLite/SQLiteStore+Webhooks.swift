import Foundation
import GRDB
public import SyncHealthCore
public import SyncHealthStore
import Synchronization

extension SQLiteStore {
    static func insertOutbox(_ messages: [OutboxMessage], _ db: Database) throws {
        guard !messages.isEmpty else { return }
        let insert = try db.cachedStatement(
            sql: """
                INSERT OR IGNORE INTO outbox (id, webhook_id, ordering_key, payload, created_at, attempts, next_attempt_at, state)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """
        )
        for m in messages {
            try insert.execute(arguments: [
                m.id, m.webhookId, m.orderingKey.storageKey, m.payload, m.createdAt.microseconds, m.attempts,
                m.nextAttemptAt.microseconds, m.state.rawValue,
            ])
        }
    }

    public func webhooks() async throws -> [WebhookSubscription] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT id, url, kinds, description, secret, created_at, disabled_reason, options FROM webhooks ORDER BY created_at, id"
            ).map { row in
                let kinds = (row[2] as String).split(separator: ",").compactMap { AlertKind(rawValue: String($0)) }
                var subscription = WebhookSubscription(
                    id: row[0],
                    url: row[1],
                    kinds: kinds,
                    description: row[3],
                    secret: row[4],
                    createdAt: Timestamp(microseconds: row[5]),
                    disabledReason: row[6]
                )
                subscription.apply(optionsJSON: row[7])
                return subscription
            }
        }
    }

    public func saveWebhook(_ w: WebhookSubscription) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO webhooks (id, url, kinds, description, secret, created_at, disabled_reason, options)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    w.id, w.url, w.kinds.map(\.rawValue).joined(separator: ","), w.description, w.secret,
                    w.createdAt.microseconds, w.disabledReason, w.optionsJSON,
                ]
            )
        }
    }

    /// Folds before a read of the outbox when the backlog holds messages for it, so that the read sees every
    /// committed message. Only then: the sender reads the outbox each time it wakes, at least once a minute, and a
    /// fold there without a message in the backlog would write the tables for no reader.
    private func foldForOutbox() async throws {
        if backlog.withLock({ $0.holdsOutboxMessages }) { try await fold() }
    }

    public func deleteWebhook(id: String) async throws -> Bool {
        // The journal may hold messages that are not in the table yet. Whatever it holds, the deletion folds first:
        // a rare act, and the one scripts/cost-guard folds with at fixed points.
        try await fold()
        return try await pool.write { db in
            try db.execute(sql: "DELETE FROM webhooks WHERE id = ?", arguments: [id])
            let existed = db.changesCount > 0
            try db.execute(sql: "DELETE FROM outbox WHERE webhook_id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM deliveries WHERE webhook_id = ?", arguments: [id])
            return existed
        }
    }

    public func dueMessages(now: Timestamp, limit: Int) async throws -> [OutboxMessage] {
        try await foldForOutbox()
        return try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT o.id, o.webhook_id, o.ordering_key, o.payload, o.created_at, o.attempts, o.next_attempt_at, o.state
                    FROM outbox o
                    WHERE o.state = 'pending' AND o.next_attempt_at <= ?
                      AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.webhook_id = o.webhook_id AND p.ordering_key = o.ordering_key AND p.seq < o.seq)
                    ORDER BY o.seq LIMIT ?
                    """,
                arguments: [now.microseconds, limit]
            ).map(Self.message)
        }
    }

    public func nextDueTime() async throws -> Timestamp? {
        try await foldForOutbox()
        return try await pool.read { db in
            try Int64.fetchOne(db, sql: "SELECT MIN(next_attempt_at) FROM outbox WHERE state = 'pending'").map(Timestamp.init(microseconds:))
        }
    }

    public func recordAttempt(_ a: DeliveryAttempt, disable reason: String?) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO deliveries (webhook_id, message_id, attempt, attempted_at, status_code, error, next_retry_at, outcome)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    a.webhookId, a.messageId, a.attempt, a.attemptedAt.microseconds, a.statusCode, a.error,
                    a.nextRetryAt?.microseconds, a.outcome.rawValue,
                ]
            )
            switch a.outcome {
            case .delivered:
                try db.execute(sql: "DELETE FROM outbox WHERE id = ?", arguments: [a.messageId])
            case .retrying:
                try db.execute(
                    sql: "UPDATE outbox SET attempts = ?, next_attempt_at = ? WHERE id = ?",
                    arguments: [a.attempt, a.nextRetryAt?.microseconds ?? a.attemptedAt.microseconds, a.messageId]
                )
            case .failed, .disabled:
                try db.execute(sql: "UPDATE outbox SET attempts = ?, state = 'failed' WHERE id = ?", arguments: [a.attempt, a.messageId])
            }
            if let reason {
                try db.execute(sql: "UPDATE webhooks SET disabled_reason = ? WHERE id = ?", arguments: [reason, a.webhookId])
            }
        }
    }

    public func deliveries(webhookId: String, limit: Int, before cursor: Int64?) async throws -> (attempts: [DeliveryAttempt], nextCursor: Int64?) {
        try await pool.read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT seq, webhook_id, message_id, attempt, attempted_at, status_code, error, next_retry_at, outcome
                    FROM deliveries WHERE webhook_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?
                    """,
                arguments: [webhookId, cursor ?? Int64.max, limit + 1]
            )
            let attempts = rows.prefix(limit).map { row in
                DeliveryAttempt(
                    seq: row[0],
                    webhookId: row[1],
                    messageId: row[2],
                    attempt: row[3],
                    attemptedAt: Timestamp(microseconds: row[4]),
                    statusCode: row[5],
                    error: row[6],
                    nextRetryAt: (row[7] as Int64?).map(Timestamp.init(microseconds:)),
                    outcome: DeliveryAttempt.Outcome(rawValue: row[8]) ?? .failed
                )
            }
            return (Array(attempts), rows.count > limit ? attempts.last?.seq : nil)
        }
    }

    public func resend(webhookId: String, messageId: String, now: Timestamp) async throws -> Bool {
        // The journal may hold messages that are not in the table yet.
        try await fold()
        return try await pool.write { db in
            try db.execute(
                sql: "UPDATE outbox SET state = 'pending', attempts = 0, next_attempt_at = ? WHERE id = ? AND webhook_id = ? AND state = 'failed'",
                arguments: [now.microseconds, messageId, webhookId]
            )
            return db.changesCount > 0
        }
    }

    static func message(_ row: Row) -> OutboxMessage {
        OutboxMessage(
            id: row[0],
            webhookId: row[1],
            orderingKey: OutboxLine(storageKey: row[2]),
            payload: row[3],
            createdAt: Timestamp(microseconds: row[4]),
            attempts: row[5],
            nextAttemptAt: Timestamp(microseconds: row[6]),
            state: OutboxMessage.State(rawValue: row[7]) ?? .failed
        )
    }
}
