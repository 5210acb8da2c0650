import GRDB
public import SyncHealthCore
public import SyncHealthStore

extension SQLiteStore {
    public func openIncidents() async throws -> [IncidentRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT \(IncidentSchema.select) FROM incidents WHERE state = 'open' ORDER BY seq").map(Self.incident)
        }
    }

    public func saveIncidents(_ records: [IncidentRecord], messages: [OutboxMessage]) async throws {
        try await pool.write { db in
            for r in records {
                let values: [(any DatabaseValueConvertible)?] = [
                    r.key.identity, r.key.appId, r.key.containerId, r.key.kind.rawValue, r.key.signature?.domain, r.key.signature?.code,
                    r.state.rawValue, r.openedAt.microseconds, r.resolvedAt?.microseconds, r.devices, r.peakDevices, r.byVersionJSON,
                    r.samplesJSON, r.notifiedAt?.microseconds, r.notifiedDevices, r.messages, r.revision, r.flappingSince?.microseconds,
                    r.quietSince?.microseconds, r.historyJSON, r.key.attestedOnly,
                ]
                if r.revision == 1 {
                    try db.execute(
                        sql: """
                            INSERT OR IGNORE INTO incidents (id, incident_key, app_id, container_id, kind, error_domain, error_code, state, opened_at,
                                resolved_at, devices, peak_devices, by_version, samples, notified_at, notified_devices, messages, revision,
                                flapping_since, quiet_since, history, attested_only)
                            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                            """,
                        arguments: StatementArguments([r.id] + values)
                    )
                } else {
                    try db.execute(
                        sql: """
                            UPDATE incidents SET incident_key = ?, app_id = ?, container_id = ?, kind = ?, error_domain = ?, error_code = ?,
                                state = ?, opened_at = ?, resolved_at = ?, devices = ?, peak_devices = ?, by_version = ?, samples = ?,
                                notified_at = ?, notified_devices = ?, messages = ?, revision = ?, flapping_since = ?, quiet_since = ?,
                                history = ?, attested_only = ?
                            WHERE id = ? AND revision = ?
                            """,
                        arguments: StatementArguments(values + [r.id, r.revision - 1])
                    )
                }
                // Rolled back with everything before it: another writer got there first.
                if db.changesCount == 0 { throw IncidentStoreError.conflict }
            }
            try Self.insertOutbox(messages, db)
        }
    }

    public func saveReleaseAlerts(_ alerts: [AlertRecord], messages: [OutboxMessage]) async throws {
        try await pool.write { db in
            for a in alerts {
                if a.state == .firing {
                    // `alerts_release_firing` refuses a second firing row of the release; an id already used too.
                    try db.execute(
                        sql: """
                            INSERT OR IGNORE INTO alerts (id, kind, state, app_id, device_id, container_id, starts_at, ends_at, summary, detail,
                                reason, app_version)
                            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                            """,
                        arguments: [
                            a.id, a.kind.rawValue, a.state.rawValue, a.appId, a.deviceId, a.containerId, a.startsAt.microseconds,
                            a.endsAt?.microseconds, a.summary, a.detail, a.reason?.rawValue, a.appVersion,
                        ]
                    )
                } else {
                    try db.execute(
                        sql: "UPDATE alerts SET state = ?, ends_at = ?, summary = ?, detail = ?, reason = ? WHERE id = ? AND state = 'firing'",
                        arguments: [a.state.rawValue, a.endsAt?.microseconds, a.summary, a.detail, a.reason?.rawValue, a.id]
                    )
                }
                if db.changesCount == 0 { throw IncidentStoreError.conflict }
            }
            try Self.insertOutbox(messages, db)
        }
    }

    public func incidents(_ query: IncidentQuery) async throws -> IncidentPage {
        try await pool.read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT \(IncidentSchema.select) FROM incidents
                    WHERE seq < ? AND (? IS NULL OR state = ?) AND (? IS NULL OR app_id = ?) AND (? IS NULL OR kind = ?)
                        AND (? IS NULL OR attested_only = ?)
                    ORDER BY seq DESC LIMIT ?
                    """,
                arguments: [
                    query.cursor ?? Int64.max, query.state?.rawValue, query.state?.rawValue, query.appId, query.appId,
                    query.kind?.rawValue, query.kind?.rawValue, query.attestedOnly, query.attestedOnly, query.limit + 1,
                ]
            )
            let page = try rows.prefix(query.limit).map(Self.incident)
            let next: Int64? = rows.count > query.limit ? rows[query.limit - 1][0] : nil
            return IncidentPage(incidents: page, nextCursor: next)
        }
    }

    public func incident(id: String) async throws -> IncidentRecord? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT \(IncidentSchema.select) FROM incidents WHERE id = ?", arguments: [id]).map(Self.incident)
        }
    }

    public func removeSample(_ key: DeviceKey) async throws {
        try await pool.write { db in
            // A candidate filter only (`_` matches any character); the samples are decoded to be sure.
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT id, samples FROM incidents WHERE app_id = ? AND samples LIKE ?",
                arguments: [key.appId, "%\"\(key.deviceId)\"%"]
            )
            for row in rows {
                let samples = IncidentRecord.samples(json: row[1])
                guard samples.contains(key.deviceId) else { continue }
                try db.execute(
                    sql: "UPDATE incidents SET samples = ?, revision = revision + 1 WHERE id = ?",
                    arguments: [IncidentRecord.json(samples.filter { $0 != key.deviceId }), row[0] as String]
                )
            }
        }
    }

    static func incident(_ row: Row) throws -> IncidentRecord {
        let kindName: String = row[4]
        let stateName: String = row[7]
        guard let kind = AlertKind(rawValue: kindName), let state = IncidentState(rawValue: stateName) else {
            throw StoreError.undecodableRecord("incident \(row[1] as String)")
        }
        let domain: String? = row[5]
        let code: Int? = row[6]
        return IncidentRecord(
            id: row[1],
            key: IncidentKey(
                appId: row[2],
                containerId: row[3],
                kind: kind,
                signature: domain.flatMap { d in code.map { ErrorSignature(domain: d, code: $0) } },
                attestedOnly: row[21]
            ),
            state: state,
            openedAt: Timestamp(microseconds: row[8]),
            resolvedAt: (row[9] as Int64?).map(Timestamp.init(microseconds:)),
            devices: row[10],
            peakDevices: row[11],
            byVersion: IncidentRecord.byVersion(json: row[12]),
            samples: IncidentRecord.samples(json: row[13]),
            notifiedAt: (row[14] as Int64?).map(Timestamp.init(microseconds:)),
            notifiedDevices: row[15],
            messages: row[16],
            flappingSince: (row[18] as Int64?).map(Timestamp.init(microseconds:)),
            quietSince: (row[19] as Int64?).map(Timestamp.init(microseconds:)),
            history: IncidentRecord.history(json: row[20]),
            revision: row[17]
        )
    }
}
