import Foundation
import Hummingbird
import NIOCore
import SyncHealthBuildInfo

/// The bodies of `/livez` and `/readyz`, `application/health+json` (draft-inadarei-api-health-check).
///
/// They never change, and load balancers ask every few seconds: each is encoded once, since the encoder would
/// otherwise be a large share of what `/livez` costs.
enum HealthBody {
    /// `version` and `releaseId` are the draft's fields for the release and the build.
    struct Health: Encodable {
        var status: String
        var description: String
        var version: String?
        var releaseId: String?
    }

    static let alive = encoded(Health(status: "pass", description: "synchealth is running"))
    static let ready = encoded(Health(status: "pass", description: "ready", version: BuildInfo.version, releaseId: BuildInfo.commit))
    static let notReady = encoded(
        Health(
            status: "fail",
            description: "loading state or keys, not yet following other replicas, or shutting down",
            version: BuildInfo.version,
            releaseId: BuildInfo.commit
        )
    )

    private static func encoded(_ value: Health) -> ByteBuffer {
        // Four strings cannot fail to encode; the fallback keeps the status should that ever change.
        (try? JSONResponse.encoder.encode(value)).map { ByteBuffer(bytes: $0) } ?? ByteBuffer(string: #"{"status":"\#(value.status)"}"#)
    }

    /// An answer with `body`, which NIO writes without consuming it.
    static func response(_ body: ByteBuffer, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/health+json"], body: .init(byteBuffer: body))
    }
}
