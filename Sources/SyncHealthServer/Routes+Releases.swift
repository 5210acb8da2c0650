import Hummingbird
import SyncHealthCore
import SyncHealthEngine

/// `GET /v1/releases`.
extension FleetRoutes {
    /// Most error signatures listed per release.
    static var topErrorCount: Int { 5 }

    func releases(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.read)
        let query = Query(request)
        guard let appId = try query.identifier("appId") else { throw APIError.invalidQuery(name: "appId", detail: "is required") }
        let dimension = try query.enumValue("by", ReleaseDimension.self) ?? .appVersion
        let releases = try await mapEngine { () async throws(EngineError) in try await engine.releases(appId: appId, by: dimension) }
        let minimum = engine.configuration.alerts.releaseMinimumDevices
        // Only app versions follow one another; OS versions are not releases of the app, so they are not judged.
        let findings = dimension == .appVersion ? ReleaseRegression.evaluate(releases, minimumDevices: minimum) : [:]
        // Newest first; devices that named no release last.
        let ordered = ReleaseOrder.sorted(releases.keys.filter { !$0.isEmpty }).reversed() + (releases[""] == nil ? [] : [""])
        return try JSONResponse.make(
            ReleasesDTO(
                appId: appId,
                by: dimension.rawValue,
                minimumDevices: minimum,
                generatedAt: engine.now.rfc3339,
                data: ordered.compactMap { release in
                    releases[release].map { ReleaseDTO(release: release, counts: $0, regression: findings[release], topErrors: Self.topErrorCount) }
                }
            )
        )
    }
}

/// `GET /v1/releases`.
struct ReleasesDTO: Encodable {
    let appId: String
    let by: String
    let minimumDevices: Int
    let generatedAt: String
    let data: [ReleaseDTO]
}

/// One release of `GET /v1/releases`.
struct ReleaseDTO: Encodable {
    let release: String
    let counts: ReleaseCounts
    let regression: ReleaseRegression.Finding?
    let topErrors: Int

    enum Key: String, CodingKey {
        case version, devices, active, silent, broken, activeBroken, brokenShare, notSyncing, bySummary, byErrorClass, topErrors
        case firstSeenAt, lastSeenAt, regression
    }

    struct TopError: Encodable {
        let domain: String
        let code: Int
        let name: String?
        let `class`: String
        let devices: Int
        let advice: [String: String]?
    }

    struct Regression: Encodable {
        let previous: String
        let share: Double
        let previousShare: Double
        let z: Double
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        let n = counts.counts
        try c.encode(release.isEmpty ? nil : release, forKey: .version)
        try c.encode(n.devices, forKey: .devices)
        try c.encode(n.active, forKey: .active)
        try c.encode(n.silent, forKey: .silent)
        try c.encode(n.broken, forKey: .broken)
        try c.encode(n.activeBroken, forKey: .activeBroken)
        try c.encode(counts.brokenShare, forKey: .brokenShare)
        try c.encode(n.notSyncing, forKey: .notSyncing)
        try c.encode(OrderedCounts(pairs: n.bySummary.map { ($0.0.rawValue, $0.1) }), forKey: .bySummary)
        try c.encode(OrderedCounts(pairs: n.byErrorClass.map { ($0.0.rawValue, $0.1) }), forKey: .byErrorClass)
        let top = counts.topErrors(limit: topErrors).map { signature, devices in
            // The class and advice of the bare code: a partial failure's items are not kept per release.
            let error = SyncErrorReport(domain: signature.domain, code: signature.code)
            return TopError(
                domain: signature.domain,
                code: signature.code,
                name: error.cloudKitName,
                class: error.errorClass.rawValue,
                devices: devices,
                advice: error.advice.map { ["who": $0.who.rawValue, "text": $0.text] }
            )
        }
        try c.encode(top, forKey: .topErrors)
        try c.encode(counts.firstSeenAt?.rfc3339, forKey: .firstSeenAt)
        try c.encode(counts.lastSeenAt?.rfc3339, forKey: .lastSeenAt)
        try c.encode(
            regression.map { Regression(previous: $0.previous, share: $0.share, previousShare: $0.previousShare, z: ($0.z * 100).rounded() / 100) },
            forKey: .regression
        )
    }
}
