import Foundation
import Hummingbird
import SyncHealthCore
import SyncHealthEngine
import SyncHealthStore

extension Query {
    /// An RFC 3339 time.
    func timestamp(_ name: String) throws(APIError) -> Timestamp? {
        guard let text = try string(name) else { return nil }
        guard let time = Timestamp(rfc3339: text) else {
            throw .invalidQuery(name: name, detail: "must be an RFC 3339 time, e.g. 2026-11-25T09:00:00Z")
        }
        return time
    }

    /// The scope named by `appId` and `containerId`.
    func scope() throws(APIError) -> FleetScope {
        FleetScope(appId: try identifier("appId"), containerId: try string("containerId"))
    }
}

/// `GET /v1/summary/scopes`, `GET /v1/summary/history`.
extension FleetRoutes {
    /// Most scopes a listing returns.
    static var maxScopes: Int { 1_000 }

    func scopes(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.read)
        let limit = try Query(request).limit(default: Self.maxScopes, max: Self.maxScopes)
        // A key limited to apps sees their scopes only.
        let all = try await engine.summaries().filter { $0.key != .all && context.sees(appId: $0.key.appId) }
        let scopes = FleetScopeSelection.largest(all, limit: limit)
        return try JSONResponse.make(
            ScopesDTO(
                data: scopes.map { FleetSummaryDTO(counts: $0.counts, scope: $0.scope) },
                total: all.count,
                generatedAt: engine.now.rfc3339
            )
        )
    }

    func history(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.read)
        let query = Query(request)
        let now = engine.now
        var scope = try query.scope()
        scope.appId = try context.app(narrowing: scope.appId)
        let to = try query.timestamp("to") ?? now
        let from = try query.timestamp("from") ?? to - .seconds(24 * 3600)
        guard from <= to else { throw APIError.invalidQuery(name: "from", detail: "must not be after to") }
        // Minutes while the whole range is still kept at that resolution; hours beyond.
        let resolution =
            try query.enumValue("resolution", HistoryResolution.self)
            ?? (from >= now - HistoryResolution.minute.retention ? .minute : .hour)
        let points = try await engine.history(scope, resolution: resolution, from: from, to: to)
        return try JSONResponse.make(
            HistoryDTO(
                appId: scope.appId,
                containerId: scope.containerId,
                resolution: resolution.rawValue,
                from: from.rfc3339,
                to: to.rfc3339,
                points: points.map { FleetSummaryDTO(counts: $0.counts, at: $0.at) }
            )
        )
    }
}

/// `GET /v1/summary/scopes`.
struct ScopesDTO: Encodable {
    let data: [FleetSummaryDTO]
    let total: Int
    let generatedAt: String
}

/// `GET /v1/summary/history`.
struct HistoryDTO: Encodable {
    let appId: String?
    let containerId: String?
    let resolution: String
    let from: String
    let to: String
    let points: [FleetSummaryDTO]

    enum Key: String, CodingKey { case appId, containerId, resolution, from, to, points }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(appId, forKey: .appId)
        try c.encode(containerId, forKey: .containerId)
        try c.encode(resolution, forKey: .resolution)
        try c.encode(from, forKey: .from)
        try c.encode(to, forKey: .to)
        try c.encode(points, forKey: .points)
    }
}
