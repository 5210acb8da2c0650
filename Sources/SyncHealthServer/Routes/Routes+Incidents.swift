import Hummingbird
import SyncHealthCore
import SyncHealthEngine
import SyncHealthStore

/// `GET /v1/incidents`, `GET /v1/incidents/{id}`.
extension FleetRoutes {
    func incidents(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.read)
        let query = Query(request)
        let incidentQuery = IncidentQuery(
            state: try query.enumValue("state", IncidentState.self),
            appId: try context.app(narrowing: query.identifier("appId")),
            kind: try query.enumValue("kind", AlertKind.self),
            limit: try query.limit(),
            cursor: try query.cursor(),
            attestedOnly: try query.bool("attestedOnly") ?? false
        )
        let page = try await engine.incidents(incidentQuery)
        return try JSONResponse.make(PageDTO(data: page.incidents.map(IncidentJSON.init), nextCursor: page.nextCursor.map(String.init)))
    }

    func incident(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.read)
        let id = try context.parameters.require("id")
        let query = Query(request)
        let limit = try query.limit()
        let offset = Int(try query.cursor() ?? 0)
        guard let incident = try await engine.incident(id: id), context.sees(appId: incident.key.appId) else {
            throw APIError.notFound("no incident \(id)")
        }
        let devices = try await engine.devices(of: incident)
        let page = devices.dropFirst(offset).prefix(limit)
        return try JSONResponse.make(
            IncidentDetailDTO(
                incident: IncidentJSON(incident),
                devices: page.map { IncidentDeviceDTO(deviceId: $0.key.deviceId, appVersion: $0.appVersion, since: $0.since.rfc3339) },
                nextCursor: offset + page.count < devices.count ? String(offset + page.count) : nil
            )
        )
    }
}

/// `GET /v1/incidents/{id}`: the incident, and a page of its devices as `firingDevices` (the incident's own
/// `devices` is their count, so the page cannot share the name).
struct IncidentDetailDTO: Encodable {
    let incident: IncidentJSON
    let devices: [IncidentDeviceDTO]
    let nextCursor: String?

    enum Key: String, CodingKey { case firingDevices, nextCursor }

    func encode(to encoder: any Encoder) throws {
        try incident.encode(to: encoder)
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(devices, forKey: .firingDevices)
        try c.encode(nextCursor, forKey: .nextCursor)
    }
}

/// One device of an incident. `appVersion` is written as `null` when the device named none: the contract requires
/// the key, and a synthesized encoder leaves a nil out.
struct IncidentDeviceDTO: Encodable {
    let deviceId: String
    let appVersion: String?
    let since: String

    enum Key: String, CodingKey { case deviceId, appVersion, since }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(deviceId, forKey: .deviceId)
        try c.encode(appVersion, forKey: .appVersion)
        try c.encode(since, forKey: .since)
    }
}
