import GRDB
import SyncHealthCore
public import SyncHealthStore

extension SQLiteStore {
    public func silences() async throws -> [Silence] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT id, matchers, starts_at, ends_at, comment, created_at, released FROM silences ORDER BY created_at, id")
                .map { row in
                    Silence(
                        id: row[0],
                        matchers: Silence.matchers(json: row[1]),
                        startsAt: Timestamp(microseconds: row[2]),
                        endsAt: Timestamp(microseconds: row[3]),
                        comment: row[4],
                        createdAt: Timestamp(microseconds: row[5]),
                        released: row[6]
                    )
                }
        }
    }

    public func saveSilence(_ s: Silence) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO silences (id, matchers, starts_at, ends_at, comment, created_at, released) VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET ends_at = MIN(ends_at, excluded.ends_at), released = (released OR excluded.released)
                    """,
                arguments: [s.id, s.matchersJSON, s.startsAt.microseconds, s.endsAt.microseconds, s.comment, s.createdAt.microseconds, s.released]
            )
        }
    }

    public func enqueue(_ messages: [OutboxMessage]) async throws {
        try await pool.write { db in try Self.insertOutbox(messages, db) }
    }
}
