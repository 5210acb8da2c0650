import Logging
import PostgresNIO
public import SyncHealthCore
public import SyncHealthStore

extension PostgresStore {
    public func openIncidents() async throws -> [IncidentRecord] {
        try await Self.incidents(
            try await run("SELECT \(unescaped: IncidentSchema.select) FROM incidents WHERE state = 'open' ORDER BY seq", logger: logger)
        )
        .map(\.record)
    }

    public func saveIncidents(_ records: [IncidentRecord], messages: [OutboxMessage]) async throws {
        try await withTransaction { connection in
            for r in records {
                let domain = r.key.signature?.domain
                let code = r.key.signature.map { Int64($0.code) }
                let query: PostgresQuery =
                    r.revision == 1
                    ? """
                    INSERT INTO incidents (id, incident_key, app_id, container_id, kind, error_domain, error_code, state, opened_at,
                        resolved_at, devices, peak_devices, by_version, samples, notified_at, notified_devices, messages, revision,
                        flapping_since, quiet_since, history, attested_only)
                    VALUES (\(r.id), \(r.key.identity), \(r.key.appId), \(r.key.containerId), \(r.key.kind.rawValue), \(domain), \(code),
                        \(r.state.rawValue), \(r.openedAt.microseconds), \(r.resolvedAt?.microseconds), \(Int64(r.devices)), \(Int64(r.peakDevices)),
                        \(r.byVersionJSON), \(r.samplesJSON), \(r.notifiedAt?.microseconds), \(Int64(r.notifiedDevices)), \(Int64(r.messages)),
                        \(Int64(r.revision)), \(r.flappingSince?.microseconds), \(r.quietSince?.microseconds), \(r.historyJSON),
                        \(r.key.attestedOnly))
                    ON CONFLICT DO NOTHING
                    RETURNING id
                    """
                    : """
                    UPDATE incidents SET state = \(r.state.rawValue), resolved_at = \(r.resolvedAt?.microseconds), devices = \(Int64(r.devices)),
                        peak_devices = \(Int64(r.peakDevices)), by_version = \(r.byVersionJSON), samples = \(r.samplesJSON),
                        notified_at = \(r.notifiedAt?.microseconds), notified_devices = \(Int64(r.notifiedDevices)),
                        messages = \(Int64(r.messages)), revision = \(Int64(r.revision)), flapping_since = \(r.flappingSince?.microseconds),
                        quiet_since = \(r.quietSince?.microseconds), history = \(r.historyJSON)
                    WHERE id = \(r.id) AND revision = \(Int64(r.revision - 1))
                    RETURNING id
                    """
                var written = false
                for try await _ in try await connection.query(query, logger: logger).decode(String.self) { written = true }
                // Rolled back with everything before it: another replica got there first.
                guard written else { throw IncidentStoreError.conflict }
            }
            try await Self.insertOutbox(messages, connection, logger: logger)
        }
    }

    public func saveReleaseAlerts(_ alerts: [AlertRecord], messages: [OutboxMessage]) async throws {
        try await withTransaction { connection in
            for a in alerts {
                // `alerts_release_firing` refuses a second firing row of the release; an id already used too.
                let query: PostgresQuery =
                    a.state == .firing
                    ? """
                    INSERT INTO alerts (id, kind, state, app_id, device_id, container_id, starts_at, ends_at, summary, detail, reason, app_version)
                    VALUES (\(a.id), \(a.kind.rawValue), \(a.state.rawValue), \(a.appId), \(a.deviceId), \(a.containerId),
                        \(a.startsAt.microseconds), \(a.endsAt?.microseconds), \(a.summary), \(a.detail), \(a.reason?.rawValue), \(a.appVersion))
                    ON CONFLICT DO NOTHING
                    RETURNING id
                    """
                    : """
                    UPDATE alerts SET state = \(a.state.rawValue), ends_at = \(a.endsAt?.microseconds), summary = \(a.summary),
                        detail = \(a.detail), reason = \(a.reason?.rawValue)
                    WHERE id = \(a.id) AND state = 'firing'
                    RETURNING id
                    """
                var written = false
                for try await _ in try await connection.query(query, logger: logger).decode(String.self) { written = true }
                // Rolled back with everything before it: another replica got there first.
                guard written else { throw IncidentStoreError.conflict }
            }
            try await Self.insertOutbox(messages, connection, logger: logger)
        }
    }

    public func incidents(_ query: IncidentQuery) async throws -> IncidentPage {
        let rows = try await Self.incidents(
            try await run(
                """
                SELECT \(unescaped: IncidentSchema.select) FROM incidents
                WHERE seq < \(query.cursor ?? Int64.max)
                  AND (\(query.state?.rawValue)::text IS NULL OR state = \(query.state?.rawValue))
                  AND (\(query.appId)::text IS NULL OR app_id = \(query.appId))
                  AND (\(query.kind?.rawValue)::text IS NULL OR kind = \(query.kind?.rawValue))
                  AND (\(query.attestedOnly)::boolean IS NULL OR attested_only = \(query.attestedOnly))
                ORDER BY seq DESC LIMIT \(query.limit + 1)
                """,
                logger: logger
            )
        )
        let page = rows.prefix(query.limit)
        return IncidentPage(incidents: page.map(\.record), nextCursor: rows.count > query.limit ? page.last?.seq : nil)
    }

    public func incident(id: String) async throws -> IncidentRecord? {
        try await Self.incidents(try await run("SELECT \(unescaped: IncidentSchema.select) FROM incidents WHERE id = \(id)", logger: logger)).first?
            .record
    }

    public func removeSample(_ key: DeviceKey) async throws {
        try await withTransaction { connection in
            // A candidate filter only (`_` matches any character); the samples are decoded to be sure.
            let rows = try await connection.query(
                "SELECT id, samples FROM incidents WHERE app_id = \(key.appId) AND samples LIKE \("%\"\(key.deviceId)\"%") FOR UPDATE",
                logger: logger
            )
            var changed: [(id: String, samples: [String])] = []
            for try await (id, json) in rows.decode((String, String).self) {
                let samples = IncidentRecord.samples(json: json)
                if samples.contains(key.deviceId) { changed.append((id, samples.filter { $0 != key.deviceId })) }
            }
            for (id, samples) in changed {
                try await connection.query(
                    "UPDATE incidents SET samples = \(IncidentRecord.json(samples)), revision = revision + 1 WHERE id = \(id)",
                    logger: logger
                )
            }
        }
    }

    static func incidents(_ rows: PostgresRowSequence) async throws -> [(seq: Int64, record: IncidentRecord)] {
        var out: [(seq: Int64, record: IncidentRecord)] = []
        for try await row in rows {
            let c = row.makeRandomAccess()
            let id = try c[1].decode(String.self)
            guard let kind = AlertKind(rawValue: try c[4].decode(String.self)), let state = IncidentState(rawValue: try c[7].decode(String.self))
            else {
                throw StoreError.undecodableRecord("incident \(id)")
            }
            let domain = try c[5].decode(String?.self)
            let code = try c[6].decode(Int64?.self)
            let record = IncidentRecord(
                id: id,
                key: IncidentKey(
                    appId: try c[2].decode(String.self),
                    containerId: try c[3].decode(String?.self),
                    kind: kind,
                    signature: domain.flatMap { d in code.map { ErrorSignature(domain: d, code: Int($0)) } },
                    attestedOnly: try c[21].decode(Bool.self)
                ),
                state: state,
                openedAt: Timestamp(microseconds: try c[8].decode(Int64.self)),
                resolvedAt: try c[9].decode(Int64?.self).map(Timestamp.init(microseconds:)),
                devices: Int(try c[10].decode(Int64.self)),
                peakDevices: Int(try c[11].decode(Int64.self)),
                byVersion: IncidentRecord.byVersion(json: try c[12].decode(String.self)),
                samples: IncidentRecord.samples(json: try c[13].decode(String.self)),
                notifiedAt: try c[14].decode(Int64?.self).map(Timestamp.init(microseconds:)),
                notifiedDevices: Int(try c[15].decode(Int64.self)),
                messages: Int(try c[16].decode(Int64.self)),
                flappingSince: try c[18].decode(Int64?.self).map(Timestamp.init(microseconds:)),
                quietSince: try c[19].decode(Int64?.self).map(Timestamp.init(microseconds:)),
                history: IncidentRecord.history(json: try c[20].decode(String?.self)),
                revision: Int(try c[17].decode(Int64.self))
            )
            out.append((try c[0].decode(Int64.self), record))
        }
        return out
    }
}
