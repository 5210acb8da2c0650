import Foundation
public import SyncHealthCore

/// Which incidents to list.
public struct IncidentQuery: Sendable, Hashable {
    /// Only open or only resolved ones.
    public var state: IncidentState?
    /// Only this app's.
    public var appId: String?
    /// Only this kind's.
    public var kind: AlertKind?
    /// At most this many.
    public var limit: Int
    /// After this position (a `nextCursor`).
    public var cursor: Int64?
    /// Only incidents of every device (`false`), only those of attested devices (`true`), or both (`nil`).
    public var attestedOnly: Bool?

    /// Creates a query.
    public init(
        state: IncidentState? = nil,
        appId: String? = nil,
        kind: AlertKind? = nil,
        limit: Int = 100,
        cursor: Int64? = nil,
        attestedOnly: Bool? = false
    ) {
        self.state = state
        self.appId = appId
        self.kind = kind
        self.limit = limit
        self.cursor = cursor
        self.attestedOnly = attestedOnly
    }

    /// Whether `record` is one the query asks for (the position aside).
    public func matches(_ record: IncidentRecord) -> Bool {
        (state == nil || record.state == state) && (appId == nil || record.key.appId == appId) && (kind == nil || record.key.kind == kind)
            && (attestedOnly == nil || record.key.attestedOnly == attestedOnly)
    }
}

/// A page of incidents, newest first.
public struct IncidentPage: Sendable {
    /// The incidents.
    public var incidents: [IncidentRecord]
    /// Where the next page starts, if there is one.
    public var nextCursor: Int64?

    /// Creates a page.
    public init(incidents: [IncidentRecord], nextCursor: Int64?) {
        self.incidents = incidents
        self.nextCursor = nextCursor
    }
}

/// Why incidents were not saved.
public enum IncidentStoreError: Error, Sendable, Equatable {
    /// A record's stored revision is not the one it was planned on, or a new incident's key already has an open
    /// one: another replica wrote first. Nothing was written.
    case conflict
}

/// Incidents as stored.
public protocol IncidentStore: Sendable {
    /// The open incidents.
    func openIncidents() async throws -> [IncidentRecord]

    /// Writes `records` and `messages` in one transaction: a record of revision 1 is a new incident, any other
    /// replaces the stored one of the revision before. Throws `IncidentStoreError.conflict`, and writes nothing,
    /// when another writer got there first. A message already written (same id) is not written again.
    func saveIncidents(_ records: [IncidentRecord], messages: [OutboxMessage]) async throws

    /// A page of incidents, newest first.
    func incidents(_ query: IncidentQuery) async throws -> IncidentPage

    /// Writes release alerts (`releaseRegression`, with `appVersion` set) and `messages` in one transaction. A
    /// firing alert is a new row, written only if its release has no alert firing; a resolved one replaces the
    /// firing row of its id, only if that still fires. Otherwise it throws `IncidentStoreError.conflict` and writes
    /// nothing: another writer got there first. A message already written (same id) is not written again.
    func saveReleaseAlerts(_ alerts: [AlertRecord], messages: [OutboxMessage]) async throws

    /// One incident.
    func incident(id: String) async throws -> IncidentRecord?

    /// Takes an erased device out of the sample devices of every incident of its app, open or resolved; each
    /// incident changed moves to its next revision, so that a step planned on the one before is refused.
    func removeSample(_ key: DeviceKey) async throws
}

extension IncidentRecord {
    /// `byVersion` as stored: a JSON object.
    public var byVersionJSON: String { Self.json(byVersion) }
    /// `samples` as stored: a JSON array.
    public var samplesJSON: String { Self.json(samples) }

    /// `history` as stored: a JSON array of `[microseconds, devices]` pairs.
    public var historyJSON: String { Self.json(history.map { [$0.at.microseconds, Int64($0.devices)] }) }

    /// `history` from its stored form (`nil`, from before it was stored: none).
    public static func history(json: String?) -> [IncidentPoint] {
        guard let json, let pairs = try? JSONDecoder().decode([[Int64]].self, from: Data(json.utf8)) else { return [] }
        return pairs.compactMap { $0.count == 2 ? IncidentPoint(at: Timestamp(microseconds: $0[0]), devices: Int($0[1])) : nil }
    }

    /// `byVersion` from its stored form.
    public static func byVersion(json: String) -> [String: Int] {
        (try? JSONDecoder().decode([String: Int].self, from: Data(json.utf8))) ?? [:]
    }

    /// `samples` from its stored form.
    public static func samples(json: String) -> [String] {
        (try? JSONDecoder().decode([String].self, from: Data(json.utf8))) ?? []
    }

    public static func json(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "null"
    }
}
