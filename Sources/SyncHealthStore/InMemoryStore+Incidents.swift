public import SyncHealthCore

extension InMemoryStore {
    public func openIncidents() async throws -> [IncidentRecord] {
        withState { $0.incidents.filter { $0.state == .open } }
    }

    public func saveIncidents(_ records: [IncidentRecord], messages: [OutboxMessage]) async throws {
        try withState { s throws(IncidentStoreError) in
            var incidents = s.incidents
            for record in records {
                if let i = incidents.firstIndex(where: { $0.id == record.id }) {
                    guard incidents[i].revision == record.revision - 1 else { throw .conflict }
                    incidents[i] = record
                } else {
                    guard record.revision == 1, !incidents.contains(where: { $0.state == .open && $0.key == record.key }) else { throw .conflict }
                    incidents.append(record)
                }
            }
            s.incidents = incidents
            for m in messages where !s.outbox.contains(where: { $0.id == m.id }) { s.outbox.append(m) }
        }
    }

    public func saveReleaseAlerts(_ alerts: [AlertRecord], messages: [OutboxMessage]) async throws {
        try withState { s throws(IncidentStoreError) in
            var copy = s
            for alert in alerts {
                if alert.state == .firing {
                    let firing = copy.alerts.contains {
                        $0.kind == .releaseRegression && $0.state == .firing && $0.appId == alert.appId && $0.appVersion == alert.appVersion
                    }
                    guard !firing, copy.alertIndex[alert.id] == nil else { throw .conflict }
                    copy.alertIndex[alert.id] = copy.alerts.count
                    copy.alerts.append(alert)
                } else {
                    guard let i = copy.alertIndex[alert.id], copy.alerts[i].state == .firing else { throw .conflict }
                    copy.alerts[i] = alert
                }
            }
            for m in messages where !copy.outbox.contains(where: { $0.id == m.id }) { copy.outbox.append(m) }
            s = copy
        }
    }

    public func incidents(_ query: IncidentQuery) async throws -> IncidentPage {
        withState { s in
            // Positions count from 1, newest last; a page goes down from the cursor.
            let cursor = query.cursor ?? .max
            let matching = s.incidents.indices.reversed().filter { Int64($0 + 1) < cursor && query.matches(s.incidents[$0]) }
            let page = matching.prefix(query.limit)
            let next = matching.count > query.limit ? page.last.map { Int64($0 + 1) } : nil
            return IncidentPage(incidents: page.map { s.incidents[$0] }, nextCursor: next)
        }
    }

    public func incident(id: String) async throws -> IncidentRecord? {
        withState { s in s.incidents.first { $0.id == id } }
    }

    public func removeSample(_ key: DeviceKey) async throws {
        withState { s in
            for i in s.incidents.indices where s.incidents[i].key.appId == key.appId && s.incidents[i].samples.contains(key.deviceId) {
                s.incidents[i].samples.removeAll { $0 == key.deviceId }
                s.incidents[i].revision += 1
            }
        }
    }
}
