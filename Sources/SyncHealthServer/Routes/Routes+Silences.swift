import Foundation
import Hummingbird
import SyncHealthCore
import SyncHealthEngine
import SyncHealthStore

/// `/v1/silences…` (admin key).
struct SilenceRoutes {
    let silences: SilenceCenter
    let audit: AuditLog

    struct CreateBody: Decodable {
        struct Matchers: Decodable {
            var appId: String?
            var containerId: String?
            var deviceId: String?
            var kind: String?
            var appVersion: String?
            var osVersion: String?
            var platform: String?
        }
        var matchers: Matchers?
        var startsAt: String?
        var endsAt: String?
        var comment: String?
    }

    func create(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.admin)
        let body = try await JSONRequest.decode(CreateBody.self, from: request, shape: #"{"matchers": {…}, "startsAt", "endsAt", "comment"}"#)
        let m = body.matchers ?? .init()
        for (name, value) in [
            ("appId", m.appId), ("containerId", m.containerId), ("deviceId", m.deviceId), ("appVersion", m.appVersion),
            ("osVersion", m.osVersion), ("platform", m.platform), ("kind", m.kind),
        ] where value?.isEmpty == true {
            throw APIError.invalidBody([.init(pointer: "/matchers/\(name)", detail: "a matcher cannot be empty; leave it out to match any value")])
        }
        var kind: AlertKind?
        if let name = m.kind {
            guard let parsed = AlertKind(rawValue: name) else {
                throw APIError.invalidBody([.init(pointer: "/matchers/kind", detail: "\(name) is not an alert kind")])
            }
            kind = parsed
        }
        func time(_ text: String?, _ pointer: String) throws(APIError) -> Timestamp? {
            guard let text else { return nil }
            guard let value = Timestamp(rfc3339: text) else { throw .invalidBody([.init(pointer: pointer, detail: "not an RFC 3339 date-time")]) }
            return value
        }
        // A key limited to apps silences its own apps' alerts only: the silence names one of them.
        guard context.allowedApps == nil || m.appId.map({ context.sees(appId: $0) }) == true else {
            throw APIError.outOfScope("A key limited to apps makes silences for one of its own apps: set matchers.appId.")
        }
        let startsAt = try time(body.startsAt, "/startsAt")
        guard let endsAt = try time(body.endsAt, "/endsAt") else {
            throw APIError.invalidBody([.init(pointer: "/endsAt", detail: "endsAt is required")])
        }
        let matchers = Silence.Matchers(
            appId: m.appId,
            containerId: m.containerId,
            deviceId: m.deviceId,
            kind: kind,
            appVersion: m.appVersion,
            osVersion: m.osVersion,
            platform: m.platform
        )
        do {
            let silence = try await silences.create(matchers: matchers, startsAt: startsAt, endsAt: endsAt, comment: body.comment ?? "")
            await audit.record(context, "silence.create", silence.id)
            return try JSONResponse.make(SilenceDTO(silence, now: silences.clock.now), status: .created)
        } catch SilenceError.invalid(let pointer, let detail) {
            throw APIError.invalidBody([.init(pointer: pointer, detail: detail)])
        } catch let error as APIError {
            throw error
        } catch {
            throw EngineError.storeUnavailable
        }
    }

    func list(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.admin)
        let now = silences.clock.now
        let shown = try await storeCall { try await silences.list() }.filter { visible($0, context) }
        return try JSONResponse.make(PageDTO(data: shown.map { SilenceDTO($0, now: now) }, nextCursor: nil))
    }

    func get(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.admin)
        guard let silence = try await storeCall({ try await silences.get(id(context)) }), visible(silence, context) else {
            throw APIError.notFound("No such silence.")
        }
        return try JSONResponse.make(SilenceDTO(silence, now: silences.clock.now))
    }

    /// A key limited to apps sees the silences of its apps only.
    func visible(_ silence: Silence, _ context: AppRequestContext) -> Bool {
        context.allowedApps == nil || silence.matchers.appId.map { context.sees(appId: $0) } == true
    }

    /// Ends the silence now; it is kept, as expired.
    func delete(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.admin)
        guard let found = try await storeCall({ try await silences.get(id(context)) }), visible(found, context),
            let silence = try await storeCall({ try await silences.expire(found.id) })
        else { throw APIError.notFound("No such silence.") }
        await audit.record(context, "silence.delete", silence.id)
        return try JSONResponse.make(SilenceDTO(silence, now: silences.clock.now))
    }

    func id(_ context: AppRequestContext) -> String {
        let raw = context.parameters.get("id") ?? ""
        return raw.removingPercentEncoding ?? raw
    }

}

/// A silence as the API shows it.
struct SilenceDTO: Encodable {
    let silence: Silence
    let now: Timestamp

    init(_ silence: Silence, now: Timestamp) {
        self.silence = silence
        self.now = now
    }

    enum Key: String, CodingKey { case id, matchers, startsAt, endsAt, comment, createdAt, state }
    enum MatcherKey: String, CodingKey { case appId, containerId, deviceId, kind, appVersion, osVersion, platform }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(silence.id, forKey: .id)
        var m = c.nestedContainer(keyedBy: MatcherKey.self, forKey: .matchers)
        try m.encodeIfPresent(silence.matchers.appId, forKey: .appId)
        try m.encodeIfPresent(silence.matchers.containerId, forKey: .containerId)
        try m.encodeIfPresent(silence.matchers.deviceId, forKey: .deviceId)
        try m.encodeIfPresent(silence.matchers.kind?.rawValue, forKey: .kind)
        try m.encodeIfPresent(silence.matchers.appVersion, forKey: .appVersion)
        try m.encodeIfPresent(silence.matchers.osVersion, forKey: .osVersion)
        try m.encodeIfPresent(silence.matchers.platform, forKey: .platform)
        try c.encode(silence.startsAt.rfc3339, forKey: .startsAt)
        try c.encode(silence.endsAt.rfc3339, forKey: .endsAt)
        try c.encode(silence.comment, forKey: .comment)
        try c.encode(silence.createdAt.rfc3339, forKey: .createdAt)
        try c.encode(silence.isActive(at: now) ? "active" : (silence.startsAt > now ? "pending" : "expired"), forKey: .state)
    }
}
