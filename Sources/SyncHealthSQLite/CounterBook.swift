import Foundation
import GRDB
import Synchronization

/// App Attest's counters on the embedded store: moved in memory, written to `device_attestations` in the background.
///
/// One process owns an SQLite store, so the counter it holds is the counter: a move is a compare-and-swap under a lock,
/// and a signed upload waits for no write of its own. A transaction a move (even grouped) waited behind the journal's
/// folds on the one writer connection, and cost signed batches much of their rate (BENCHMARKS.md, #63).
///
/// Moves are written by the maintenance loop every tick (`SQLiteMaintenance`, 50 ms), before a read that counts by
/// app version, before a backup, and when the store closes. A crash loses at most the last tick's moves: those
/// counters go back that far, which would let a request of those 50 ms be replayed once; its events are in the
/// journal already (an upload is acknowledged only once durable), so the replay applies nothing.
final class CounterBook: Sendable {
    struct Key: Hashable, Sendable {
        var appId: String
        var keyId: [UInt8]
    }

    struct Entry: Sendable {
        var counter: UInt32
        var appVersion: String?
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        var dirty: Set<Key> = []
        /// Moves being written now (a flush may run beside another: a read's, the maintenance loop's).
        var writing: Set<Key> = []
    }

    /// Entries kept once written: past this many, those not waiting to be written are dropped (the table has them).
    let limit: Int

    private let state = Mutex(State())

    /// A book that keeps up to `limit` written entries.
    init(limit: Int = 100_000) {
        self.limit = limit
    }

    /// Moves `key`'s counter to `counter` if that is above the one held, noting `appVersion`; `load` reads the
    /// stored counter and app version the first time (`nil`: no such key, and `false`).
    func advance(_ key: Key, to counter: UInt32, appVersion: String?, load: () async throws -> Entry?) async throws -> Bool {
        if state.withLock({ $0.entries[key] == nil }) {
            guard let stored = try await load() else { return false }
            state.withLock { s in
                if s.entries[key] == nil { s.entries[key] = stored }
            }
        }
        return state.withLock { s in
            guard var entry = s.entries[key], counter > entry.counter else { return false }
            entry.counter = counter
            entry.appVersion = appVersion
            s.entries[key] = entry
            s.dirty.insert(key)
            return true
        }
    }

    /// The counter held for `key`, if it is held.
    func counter(of key: Key) -> UInt32? {
        state.withLock { $0.entries[key]?.counter }
    }

    /// Forgets the keys (deleted, or attested anew: the table's row is the truth).
    func forget(_ keys: [Key]) {
        state.withLock { s in
            for key in keys {
                s.entries[key] = nil
                s.dirty.remove(key)
            }
        }
    }

    /// Whether moves wait to be written.
    var hasMoves: Bool { state.withLock { !$0.dirty.isEmpty } }

    /// How many keys are held.
    var count: Int { state.withLock { $0.entries.count } }

    /// Writes the moves made since the last write, in one transaction. A failed write leaves them to the next.
    func flush(_ pool: DatabasePool) async throws {
        let moves = state.withLock { s -> [(Key, Entry)] in
            let moves = s.dirty.compactMap { key in s.entries[key].map { (key, $0) } }
            s.writing.formUnion(s.dirty)
            s.dirty.removeAll(keepingCapacity: true)
            return moves
        }
        guard !moves.isEmpty else { return }
        do {
            try await pool.write { db in
                let statement = try db.cachedStatement(
                    sql: "UPDATE device_attestations SET counter = ?, app_version = ? WHERE app_id = ? AND key_id = ? AND counter < ?"
                )
                for (key, entry) in moves {
                    try statement.execute(
                        arguments: [Int64(entry.counter), entry.appVersion, key.appId, Data(key.keyId), Int64(entry.counter)]
                    )
                }
            }
        } catch {
            state.withLock { s in
                for (key, _) in moves {
                    s.writing.remove(key)
                    if s.entries[key] != nil { s.dirty.insert(key) }
                }
            }
            throw error
        }
        // Only entries the table holds as they are may go: a key loaded again reads what was written.
        state.withLock { s in
            for (key, _) in moves { s.writing.remove(key) }
            guard s.entries.count > limit else { return }
            s.entries = s.entries.filter { s.dirty.contains($0.key) || s.writing.contains($0.key) }
        }
    }
}
