public import SyncHealthCore

extension InMemoryStore {
    public func keys() async throws -> [StoredKey] {
        withState { $0.keys }
    }

    public func insertKey(_ key: StoredKey) async throws {
        withState { s in if !s.keys.contains(where: { $0.id == key.id }) { s.keys.append(key) } }
    }

    public func revokeKey(id: String, at: Timestamp) async throws -> Bool {
        withState { s in
            guard let index = s.keys.firstIndex(where: { $0.id == id }) else { return false }
            s.keys[index].revokedAt = s.keys[index].revokedAt ?? at
            return true
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
