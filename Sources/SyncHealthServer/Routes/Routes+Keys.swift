import Crypto
import Foundation
import Hummingbird
import Logging
import SyncHealthCore
import SyncHealthEngine
import SyncHealthStore
import SyncHealthWebhooks

/// `/v1/keys…` (admin key) and `/v1/audit` (admin key for every app).
struct KeyRoutes {
    let keys: KeyDirectory
    let audit: AuditLog

    struct CreateBody: Decodable {
        var role: String?
        var appIds: [String]?
        var description: String?
        var expiresAt: String?
    }

    func create(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.admin)
        let body = try await JSONRequest.decode(CreateBody.self, from: request, shape: #"{"role", "appIds", "description", "expiresAt"}"#)
        guard let roleName = body.role, let role = KeyScope(rawValue: roleName), role != .metrics else {
            throw APIError.invalidBody([.init(pointer: "/role", detail: "role is required: ingest, read or admin")])
        }
        var appIds: [String]?
        if let given = body.appIds {
            guard !given.isEmpty, given.count <= 100 else {
                throw APIError.invalidBody([.init(pointer: "/appIds", detail: "1 to 100 app ids; leave it out for a key for every app")])
            }
            for (index, id) in given.enumerated() where !DeviceKey.isValidId(id) {
                throw APIError.invalidBody([.init(pointer: "/appIds/\(index)", detail: "must be 1-128 characters of A-Z a-z 0-9 . _ : -")])
            }
            appIds = Array(Set(given)).sorted()
        }
        guard context.covers(appIds: appIds) else {
            throw APIError.outOfScope("A key limited to apps makes keys for some of its own apps only: name them in appIds.")
        }
        let description = body.description ?? ""
        guard description.count <= 1024 else {
            throw APIError.invalidBody([.init(pointer: "/description", detail: "description is longer than 1024 characters")])
        }
        let now = keys.clock.now
        var expiresAt: Timestamp?
        if let text = body.expiresAt {
            guard let time = Timestamp(rfc3339: text), time > now else {
                throw APIError.invalidBody([.init(pointer: "/expiresAt", detail: "must be an RFC 3339 date-time in the future")])
            }
            expiresAt = time
        }
        try await storeCall { try await keys.reload() }
        guard keys.liveCount(appIds: appIds) < keys.limit else { throw APIError.keyLimit(limit: keys.limit, global: appIds == nil) }
        // A made key is no stronger than its maker: it ends no later than the maker's (earliest) end.
        if let maker = context.keyId, let stored = keys.stored(id: maker), let makerEnd = stored.standing?.expiresAt ?? stored.key.expiresAt {
            if let asked = expiresAt, asked > makerEnd {
                throw APIError.invalidBody([
                    .init(pointer: "/expiresAt", detail: "must be no later than the expiry of the key that makes it, \(makerEnd.rfc3339)")
                ])
            }
            expiresAt = expiresAt ?? makerEnd
        }
        // 256 random bits, base64url: `shk_` and 43 characters; the id, like a subscription's, a part of another.
        let secret = "shk_" + RandomToken.make()
        let key = StoredKey(
            id: "key_" + RandomToken.make().prefix(22),
            role: role.rawValue,
            appIds: appIds,
            description: description,
            secretDigest: Array(SHA256.hash(data: Array(secret.utf8))),
            createdAt: now,
            expiresAt: expiresAt,
            createdBy: context.keyId ?? ""
        )
        try await storeCall { try await keys.store.insertKey(key) }
        try await storeCall { try await keys.reload() }
        await audit.record(context, "key.create", key.id)
        return try JSONResponse.secret(KeyDTO(key, now: now, secret: secret), status: .created)
    }

    /// A page of keys, oldest first: the configured ones first to a key for every app, then the stored ones the
    /// caller's apps cover.
    func list(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.admin)
        let query = Query(request)
        let limit = try query.limit()
        var position = try Self.position(query.string("cursor"))
        // The configured keys are listed to a key for every app, so that ops see every way in.
        var data = position == nil && context.allowedApps == nil ? keys.configured.grants.map(KeyDTO.init(configured:)) : []
        var found: [StoredKey] = []
        var more = true
        // A key for some apps skips the keys of others: read on until the page is full, at most 20 reads a page.
        for _ in 0..<20 where more && found.count < limit {
            let page = try await storeCall { [position] in try await keys.store.keys(after: position, limit: limit) }
            found += page.filter { context.covers(appIds: $0.appIds) }.prefix(limit - found.count)
            more = page.count == limit
            position = page.last.map(KeyPosition.init(after:))
        }
        if let last = found.last, found.count == limit { position = KeyPosition(after: last) }
        let now = keys.clock.now
        let standings = keys.standings(of: found.map(\.id))
        data += found.map { KeyDTO($0, now: now, standing: standings[$0.id]) }
        let next = more || found.count == limit ? position.map(Self.cursor) : nil
        return try JSONResponse.make(PageDTO(data: data, nextCursor: next))
    }

    /// The `nextCursor` that starts a page after `position`: its creation time in microseconds, a dot, its id.
    static func cursor(_ position: KeyPosition) -> String { "\(position.createdAt.microseconds).\(position.id)" }

    /// A `cursor` read back.
    static func position(_ cursor: String?) throws(APIError) -> KeyPosition? {
        guard let cursor else { return nil }
        let parts = cursor.split(separator: ".", maxSplits: 1)
        guard parts.count == 2, let micros = Int64(parts[0]), DeviceKey.isValidId(String(parts[1])) else {
            throw .invalidQuery(name: "cursor", detail: "must be a nextCursor from a previous page")
        }
        return KeyPosition(createdAt: Timestamp(microseconds: micros), id: String(parts[1]))
    }

    /// Revokes a stored key: every replica refuses it within a second.
    func delete(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.admin)
        let id = context.parameters.get("id") ?? ""
        if context.allowedApps == nil, keys.configured.grants.contains(where: { $0.id == id }) { throw APIError.configuredKey }
        try await storeCall { try await keys.reload() }
        guard let key = keys.stored(id: id)?.key, context.covers(appIds: key.appIds) else {
            throw APIError.notFound("No key \(id).")
        }
        _ = try await storeCall { try await keys.store.revokeKey(id: id, at: keys.clock.now) }
        try await storeCall { try await keys.reload() }
        await audit.record(context, "key.revoke", id)
        return Response(status: .noContent)
    }

    /// The key the request was made with: what the dashboard shows in its header.
    func current(_ request: Request, context: AppRequestContext) async throws -> Response {
        guard let scope = context.scope else { throw APIError.unauthorized }
        return try JSONResponse.make(
            CurrentKeyDTO(id: context.keyId ?? "", role: scope.rawValue, appIds: context.allowedApps.map { $0.sorted() })
        )
    }

    func auditLog(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.admin)
        try context.requireGlobal()
        let query = Query(request)
        let limit = try query.limit()
        let before = try query.cursor()
        let entries = try await storeCall { try await keys.store.auditEntries(before: before, limit: limit) }
        return try JSONResponse.make(
            PageDTO(data: entries.map(AuditDTO.init), nextCursor: entries.count == limit ? entries.last.map { String($0.seq) } : nil)
        )
    }

}

/// Writes who changed what; a failed write is logged, never the change's failure (it is made by then).
struct AuditLog: Sendable {
    let store: any AccessStore
    let clock: any ServiceClock

    func record(_ context: AppRequestContext, _ action: String, _ target: String) async {
        let entry = AuditEntry(at: clock.now, keyId: context.keyId ?? "", action: action, target: target, address: context.address)
        do {
            try await store.appendAudit(entry)
        } catch {
            context.logger.error(
                "Cannot write the audit log",
                metadata: ["audit.action": "\(action)", "audit.target": "\(target)", "error": "\(String(reflecting: error))"]
            )
        }
    }
}

/// A key as the API shows it: the secret only in the answer that made it.
struct KeyDTO: Encodable {
    var id: String
    var role: String
    var appIds: [String]?
    var description: String
    var source: String
    var createdAt: String?
    var createdBy: String?
    var expiresAt: String?
    var revokedAt: String?
    var lastUsedAt: String?
    var state: String
    /// For a key revoked because a key above it was: that key's id.
    var revokedWith: String?
    var key: String?

    init(_ stored: StoredKey, now: Timestamp, secret: String? = nil, standing: KeyLineage.Standing? = nil) {
        id = stored.id
        role = stored.role
        appIds = stored.appIds
        description = stored.description
        source = "api"
        createdAt = stored.createdAt.rfc3339
        createdBy = stored.createdBy
        expiresAt = stored.expiresAt?.rfc3339
        revokedAt = stored.revokedAt?.rfc3339
        lastUsedAt = stored.lastUsedAt?.rfc3339
        revokedWith = stored.revokedAt == nil ? standing?.revokedWith : nil
        let end = standing?.expiresAt ?? stored.expiresAt
        state = stored.revokedAt != nil || revokedWith != nil ? "revoked" : end.map { $0 <= now } == true ? "expired" : "active"
        key = secret
    }

    init(configured grant: KeyGrant) {
        id = grant.id
        role = grant.scope.rawValue
        appIds = grant.apps.map { $0.sorted() }
        description = "configured in the environment; not deletable through the API"
        source = "environment"
        state = "active"
    }
}

/// `GET /v1/keys/current`.
struct CurrentKeyDTO: Encodable {
    let id: String
    let role: String
    let appIds: [String]?
}

/// One audit entry.
struct AuditDTO: Encodable {
    let seq: String
    let at: String
    let keyId: String
    let action: String
    let target: String
    let address: String

    init(_ entry: AuditEntry) {
        seq = String(entry.seq)
        at = entry.at.rfc3339
        keyId = entry.keyId
        action = entry.action
        target = entry.target
        address = entry.address
    }
}
