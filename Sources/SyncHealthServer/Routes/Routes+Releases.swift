import Hummingbird
import SyncHealthAttest
import SyncHealthCore
import SyncHealthEngine
import SyncHealthStore

/// `GET /v1/releases`.
extension FleetRoutes {
    /// Most error signatures listed per release.
    static var topErrorCount: Int { 5 }

    func releases(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.read)
        let query = Query(request)
        guard let appId = try context.app(narrowing: query.identifier("appId")) else {
            throw APIError.invalidQuery(name: "appId", detail: "is required")
        }
        let dimension = try query.enumValue("by", ReleaseDimension.self) ?? .appVersion
        let releases = try await engine.releases(appId: appId, by: dimension)
        let minimum = engine.configuration.alerts.releaseMinimumDevices
        // Only app versions follow one another; OS versions are not releases of the app, so they are not judged.
        let findings = dimension == .appVersion ? ReleaseRegression.evaluate(releases, minimumDevices: minimum) : [:]
        // Newest first; devices that named no release last.
        let ordered = ReleaseOrder.sorted(releases.keys.filter { !$0.isEmpty }).reversed() + (releases[""] == nil ? [] : [""])
        // For an app that attests: its attested devices by the app version of their last signed upload.
        let attested: [String: Int]? =
            if dimension == .appVersion, let gate = attestation, gate.policy.apps[appId] != nil {
                try await storeCall { try await gate.store.attestedDevicesByAppVersion(appId: appId) }
            } else {
                nil
            }
        return try JSONResponse.make(
            ReleasesDTO(
                appId: appId,
                by: dimension.rawValue,
                minimumDevices: minimum,
                generatedAt: engine.now.rfc3339,
                data: ordered.compactMap { release in
                    releases[release].map {
                        ReleaseDTO(
                            release: release,
                            counts: $0,
                            regression: findings[release],
                            topErrors: Self.topErrorCount,
                            attestedDevices: attested.map { $0[release] ?? 0 }
                        )
                    }
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
    /// Devices of this release with an attested key (for apps that attest).
    var attestedDevices: Int? = nil

    enum Key: String, CodingKey {
        case version, activeBroken, brokenShare, topErrors, firstSeenAt, lastSeenAt, regression, attestedDevices
    }

    /// An error signature as errors are shown everywhere (class, CloudKit name, advice), with its devices.
    struct TopError: Encodable {
        let error: ErrorDTO
        let devices: Int

        enum Key: String, CodingKey { case devices }

        func encode(to encoder: any Encoder) throws {
            try error.encode(to: encoder)
            var c = encoder.container(keyedBy: Key.self)
            try c.encode(devices, forKey: .devices)
        }
    }

    struct Regression: Encodable {
        let previous: String
        let share: Double
        let previousShare: Double
        let z: Double
    }

    func encode(to encoder: any Encoder) throws {
        // The counters as `GET /v1/summary` writes them, then what a release adds, in the same object.
        try FleetSummaryDTO(counts: counts.counts).encode(to: encoder)
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(release.isEmpty ? nil : release, forKey: .version)
        try c.encode(counts.counts.activeBroken, forKey: .activeBroken)
        try c.encode(counts.brokenShare, forKey: .brokenShare)
        // The class and advice of the bare code: a partial failure's items are not kept per release.
        let top = counts.topErrors(limit: topErrors).map { signature, devices in
            TopError(error: ErrorDTO(SyncErrorReport(domain: signature.domain, code: signature.code)), devices: devices)
        }
        try c.encode(top, forKey: .topErrors)
        try c.encode(counts.firstSeenAt?.rfc3339, forKey: .firstSeenAt)
        try c.encode(counts.lastSeenAt?.rfc3339, forKey: .lastSeenAt)
        try c.encode(
            regression.map { Regression(previous: $0.previous, share: $0.share, previousShare: $0.previousShare, z: ($0.z * 100).rounded() / 100) },
            forKey: .regression
        )
        if let attestedDevices { try c.encode(attestedDevices, forKey: .attestedDevices) }
    }
}
