import PostgresNIO
import SyncHealthCore
public import SyncHealthStore

extension PostgresStore {
    public func silences() async throws -> [Silence] {
        var all: [Silence] = []
        let rows = try await run(
            """
            SELECT id, matchers, starts_at, ends_at, comment, created_at, released FROM silences ORDER BY created_at, id
            """,
            logger: logger
        )
        for try await (id, matchers, startsAt, endsAt, comment, createdAt, released) in rows.decode(
            (String, String, Int64, Int64, String, Int64, Bool).self
        ) {
            all.append(
                Silence(
                    id: id,
                    matchers: Silence.matchers(json: matchers),
                    startsAt: Timestamp(microseconds: startsAt),
                    endsAt: Timestamp(microseconds: endsAt),
                    comment: comment,
                    createdAt: Timestamp(microseconds: createdAt),
                    released: released
                )
            )
        }
        return all
    }

    public func saveSilence(_ s: Silence) async throws {
        try await run(
            """
            INSERT INTO silences (id, matchers, starts_at, ends_at, comment, created_at, released)
            VALUES (\(s.id), \(s.matchersJSON), \(s.startsAt.microseconds), \(s.endsAt.microseconds), \(s.comment), \(s.createdAt.microseconds), \(s.released))
            ON CONFLICT (id) DO UPDATE SET ends_at = LEAST(silences.ends_at, excluded.ends_at), released = (silences.released OR excluded.released)
            """,
            logger: logger
        )
    }

    public func enqueue(_ messages: [OutboxMessage]) async throws {
        try await withTransaction { connection in try await Self.insertOutbox(messages, connection, logger: logger) }
    }

    /// Writes outbox messages on `connection`; a message already there (same id) is not written again.
    static func insertOutbox(_ messages: [OutboxMessage], _ connection: PostgresConnection, logger: Logger) async throws {
        for m in messages {
            try await connection.query(
                """
                INSERT INTO outbox (id, webhook_id, ordering_key, payload, created_at, attempts, next_attempt_at, state)
                VALUES (\(m.id), \(m.webhookId), \(m.orderingKey.storageKey), \(m.payload), \(m.createdAt.microseconds), \(m.attempts),
                        \(m.nextAttemptAt.microseconds), \(m.state.rawValue))
                ON CONFLICT (id) DO NOTHING
                """,
                logger: logger
            )
        }
    }
}
