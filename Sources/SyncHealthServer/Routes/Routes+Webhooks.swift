import Foundation
import Hummingbird
import SyncHealthCore
import SyncHealthEngine
import SyncHealthStore

/// `/v1/webhooks…` (admin key).
struct WebhookRoutes {
    let webhooks: WebhookCenter
    /// Woken when a failed message is scheduled again.
    let outbox: OutboxSender
    let audit: AuditLog

    struct CreateBody: Decodable {
        var url: String?
        var kinds: [String]?
        var description: String?
        var format: String?
        var routingKey: String?
        var appIds: [String]?
        var containerIds: [String]?
        var errorClasses: [String]?
        var grouping: String?
        var attestedOnly: Bool?
    }

    func create(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.admin)
        let body = try await JSONRequest.decode(
            CreateBody.self,
            from: request,
            shape: #"{"url", "kinds", "description", "format", "routingKey", "appIds", "containerIds", "errorClasses", "grouping", "attestedOnly"}"#
        )
        guard let url = body.url else { throw APIError.invalidBody([.init(pointer: "/url", detail: "url is required")]) }
        if let description = body.description, description.count > 1024 {
            throw APIError.invalidBody([.init(pointer: "/description", detail: "description is longer than 1024 characters")])
        }
        // A key limited to apps subscribes to its own apps' alerts only, named.
        guard context.covers(appIds: body.appIds) else {
            throw APIError.outOfScope("A key limited to apps makes subscriptions for some of its own apps only: name them in appIds.")
        }
        do {
            let subscription = try await webhooks.create(
                WebhookRequestFields(
                    url: url,
                    kinds: body.kinds ?? [],
                    description: body.description,
                    format: body.format,
                    routingKey: body.routingKey,
                    appIds: body.appIds ?? [],
                    containerIds: body.containerIds ?? [],
                    errorClasses: body.errorClasses ?? [],
                    grouping: body.grouping,
                    attestedOnly: body.attestedOnly ?? false
                )
            )
            await audit.record(context, "webhook.create", subscription.id)
            return try JSONResponse.secret(WebhookDTO(subscription, includeSecret: true), status: .created)
        } catch WebhookError.invalidURL(let why) {
            throw APIError.invalidBody([.init(pointer: "/url", detail: why)])
        } catch WebhookError.invalidField(let pointer, let detail) {
            throw APIError.invalidBody([.init(pointer: pointer, detail: detail)])
        } catch WebhookError.invalidKinds(let kind) {
            throw APIError.invalidBody([
                .init(pointer: "/kinds", detail: "\(kind) is not an alert kind; use " + AlertKind.allCases.map(\.rawValue).joined(separator: ", "))
            ])
        }
    }

    func list(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.admin)
        let visible = try await webhooks.list().filter { context.covers(appIds: $0.appIds) }
        return try JSONResponse.make(PageDTO(data: visible.map { WebhookDTO($0, includeSecret: false) }, nextCursor: nil))
    }

    func get(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.admin)
        return try JSONResponse.make(WebhookDTO(try await subscription(context), includeSecret: false))
    }

    func delete(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.admin)
        let id = try await subscription(context).id
        guard try await webhooks.delete(id) else { throw APIError.notFound("No such webhook.") }
        await audit.record(context, "webhook.delete", id)
        return Response(status: .noContent)
    }

    func deliveries(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.admin)
        let query = Query(request)
        let page = try await webhooks.deliveries(try await subscription(context).id, limit: try query.limit(), before: try query.cursor())
        return try JSONResponse.make(PageDTO(data: page.attempts.map(DeliveryDTO.init), nextCursor: page.nextCursor.map(String.init)))
    }

    func resend(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.admin)
        let id = try await subscription(context).id
        let messageId = context.parameters.get("deliveryId") ?? ""
        guard try await webhooks.resend(id, messageId: messageId) else {
            throw APIError.notFound("No failed delivery \(messageId) for this webhook; only failed messages can be sent again.")
        }
        outbox.notify()
        await audit.record(context, "webhook.resend", "\(id)/\(messageId)")
        return try JSONResponse.make(["status": "pending", "messageId": messageId], status: .accepted)
    }

    func subscription(_ context: AppRequestContext) async throws -> WebhookSubscription {
        let raw = context.parameters.get("id") ?? ""
        // Another team's subscription does not exist for a key limited to other apps.
        guard let found = try await webhooks.get(raw.removingPercentEncoding ?? raw), context.covers(appIds: found.appIds) else {
            throw APIError.notFound("No such webhook.")
        }
        return found
    }
}

/// A subscription as the API shows it; the secret only when it is created.
struct WebhookDTO: Encodable {
    let subscription: WebhookSubscription
    let includeSecret: Bool

    init(_ subscription: WebhookSubscription, includeSecret: Bool) {
        self.subscription = subscription
        self.includeSecret = includeSecret
    }

    enum Key: String, CodingKey {
        case id, url, kinds, description, secret, createdAt, disabled, disabledReason, format, routingKey, appIds, containerIds, errorClasses
        case grouping, attestedOnly
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(subscription.id, forKey: .id)
        try c.encode(subscription.url, forKey: .url)
        try c.encode(subscription.kinds.map(\.rawValue), forKey: .kinds)
        try c.encode(subscription.description, forKey: .description)
        if includeSecret { try c.encode(subscription.secret, forKey: .secret) }
        try c.encode(subscription.createdAt.rfc3339, forKey: .createdAt)
        try c.encode(subscription.disabledReason != nil, forKey: .disabled)
        try c.encode(subscription.disabledReason, forKey: .disabledReason)
        try c.encode(subscription.format.rawValue, forKey: .format)
        try c.encode(subscription.routingKey, forKey: .routingKey)
        try c.encode(subscription.appIds, forKey: .appIds)
        try c.encode(subscription.containerIds, forKey: .containerIds)
        try c.encode(subscription.errorClasses.map(\.rawValue), forKey: .errorClasses)
        try c.encode(subscription.effectiveGrouping.rawValue, forKey: .grouping)
        // Only when set: a subscription that does not ask reads as it did before App Attest.
        if subscription.attestedOnly { try c.encode(true, forKey: .attestedOnly) }
    }
}

/// One delivery attempt.
struct DeliveryDTO: Encodable {
    let attempt: DeliveryAttempt
    init(_ attempt: DeliveryAttempt) { self.attempt = attempt }

    enum Key: String, CodingKey { case id, messageId, attempt, attemptedAt, statusCode, error, nextRetryAt, outcome }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(String(attempt.seq), forKey: .id)
        try c.encode(attempt.messageId, forKey: .messageId)
        try c.encode(attempt.attempt, forKey: .attempt)
        try c.encode(attempt.attemptedAt.rfc3339, forKey: .attemptedAt)
        try c.encode(attempt.statusCode, forKey: .statusCode)
        try c.encode(attempt.error, forKey: .error)
        try c.encode(attempt.nextRetryAt?.rfc3339, forKey: .nextRetryAt)
        try c.encode(attempt.outcome.rawValue, forKey: .outcome)
    }
}
