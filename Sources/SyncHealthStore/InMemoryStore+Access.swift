public import SyncHealthCore

extension InMemoryStore {
    public func keyChanges(after seq: Int64) async throws -> KeyChanges {
        withState { s in
            let changes = s.keys.compactMap { key in s.keyChangeSeq[key.id].flatMap { $0 > seq ? KeyChange(key: key, seq: $0) : nil } }
            return KeyChanges(changes: changes.sorted { $0.seq < $1.seq }, through: s.lastKeyChange)
        }
    }

    public func keys(after position: KeyPosition?, limit: Int) async throws -> [StoredKey] {
        withState { s in
            Array(
                s.keys.filter { key in position.map { $0 < KeyPosition(after: key) } ?? true }
                    .sorted { KeyPosition(after: $0) < KeyPosition(after: $1) }.prefix(limit)
            )
        }
    }

    public func insertKey(_ key: StoredKey) async throws {
        withState { s in
            guard !s.keys.contains(where: { $0.id == key.id }) else { return }
            s.keys.append(key)
            s.noteKeyChange(key.id)
        }
    }

    public func revokeKey(id: String, at: Timestamp) async throws -> Bool {
        withState { s in
            guard let index = s.keys.firstIndex(where: { $0.id == id }) else { return false }
            s.keys[index].revokedAt = s.keys[index].revokedAt ?? at
            s.noteKeyChange(id)
            return true
        }
    }

    public func deleteKeys(ids: [String]) async throws -> Int {
        let ids = Set(ids)
        return withState { s in
            let before = s.keys.count
            s.keys.removeAll { ids.contains($0.id) }
            for id in ids { s.keyChangeSeq[id] = nil }
            return before - s.keys.count
        }
    }

    public func touchKeys(_ used: [String: Timestamp]) async throws {
        withState { s in
            for index in s.keys.indices {
                guard let at = used[s.keys[index].id] else { continue }
                s.keys[index].lastUsedAt = max(s.keys[index].lastUsedAt ?? at, at)
            }
        }
    }

    public func appendAudit(_ entry: AuditEntry) async throws {
        withState { s in
            var entry = entry
            entry.seq = (s.audit.last?.seq ?? 0) + 1
            s.audit.append(entry)
        }
    }

    public func auditEntries(before: Int64?, limit: Int) async throws -> [AuditEntry] {
        withState { s in Array(s.audit.reversed().filter { before == nil || $0.seq < before ?? 0 }.prefix(limit)) }
    }

    public func pruneAudit(before cutoff: Timestamp, limit: Int) async throws -> Int {
        withState { s in
            let old = s.audit.prefix(limit).prefix { $0.at < cutoff }.count
            s.audit.removeFirst(old)
            return old
        }
    }
}

extension InMemoryStore.State {
    mutating func noteKeyChange(_ id: String) {
        lastKeyChange += 1
        keyChangeSeq[id] = lastKeyChange
    }
}
