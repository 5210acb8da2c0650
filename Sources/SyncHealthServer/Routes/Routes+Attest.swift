import Foundation
import Hummingbird
import Logging
import NIOCore
import SyncHealthCore
import SyncHealthEngine
import SyncHealthStore

/// `POST /v1/attest/challenge`, `POST /v1/attest`: a device proves its install is genuine (App Attest).
struct AttestRoutes {
    /// `nil` where the service was built without a store for it (router tests): every app is unlisted.
    let gate: AppAttestGate?
    /// Per API key (by its id), both endpoints together.
    var keyLimiter = RateLimiter<String>(limit: nil)
    /// Per device id, `POST /v1/attest`.
    var deviceLimiter = RateLimiter<DeviceKey>(limit: nil)
    var clock: any ServiceClock = SystemClock()
    /// Where key replacements are recorded (`GET /v1/audit`).
    var audit: AuditLog? = nil

    /// What `POST /v1/attest` and `POST /v1/attest/token` check before their work: the ids, the key's apps, that the
    /// app attests, and the key's and the device's rate limits. The gate that does the work.
    func admit(appId: String, deviceId: String, context: AppRequestContext) throws(APIError) -> AppAttestGate {
        try Self.check(appId: appId)
        guard DeviceKey.isValidId(deviceId) else {
            throw APIError.invalidBody([.init(pointer: "/deviceId", detail: "must be 1-128 characters of A-Z a-z 0-9 . _ : -")])
        }
        if let apps = context.allowedApps, !apps.contains(appId) { throw APIError.appNotAllowed(appId: appId) }
        guard let gate else { throw APIError.attestationNotConfigured(appId: appId) }
        try take(keyLimiter, context.keyId ?? "")
        try take(deviceLimiter, DeviceKey(appId: appId, deviceId: deviceId))
        return gate
    }

    /// Takes a token from `limiter`'s bucket for `key`; 429 with `Retry-After` when there is none.
    func take<Key>(_ limiter: RateLimiter<Key>, _ key: Key) throws(APIError) {
        let decision = limiter.take(key, now: clock.now)
        guard decision.allowed else {
            throw APIError.rateLimited(retryAfterSeconds: decision.retryAfterSeconds, limit: Int(limiter.limit?.burst ?? 0))
        }
    }

    struct ChallengeBody: Decodable {
        var appId: String?
    }

    struct ChallengeDTO: Encodable {
        var challenge: String
        var expiresAt: String
    }

    struct AttestBody: Decodable {
        var appId: String
        var deviceId: String
        var keyId: String
        var attestation: String
        var challenge: String
        /// To replace the device's key: the current key's id and its assertion over the challenge's bytes.
        var currentKeyId: String?
        var currentKeyAssertion: String?
    }

    struct AttestedDTO: Encodable {
        var deviceId: String
        var keyId: String
        var environment: String
        var attestedAt: String
    }

    func challenge(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.ingest)
        let body = try await JSONRequest.decode(ChallengeBody.self, from: request, shape: #"{"appId": "…"}"#)
        let appId = try context.app(narrowing: body.appId)
        guard let appId else {
            throw APIError.invalidBody([.init(pointer: "/appId", detail: "is required: a challenge is issued for one app")])
        }
        try Self.check(appId: appId)
        guard let gate else { throw APIError.attestationNotConfigured(appId: appId) }
        try take(keyLimiter, context.keyId ?? "")
        let issued = try await gate.issueChallenge(appId: appId)
        return try JSONResponse.make(
            ChallengeDTO(challenge: Data(issued.challenge).base64EncodedString(), expiresAt: issued.expiresAt.rfc3339),
            status: .created
        )
    }

    func attest(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.ingest)
        let body = try await JSONRequest.decode(
            AttestBody.self,
            from: request,
            shape: #"{"appId", "deviceId", "keyId", "attestation", "challenge"} (the last three base64)"#
        )
        let gate = try admit(appId: body.appId, deviceId: body.deviceId, context: context)
        let bytes = Self.bytes
        var proof: AppAttestGate.Assertion?
        switch (body.currentKeyId, body.currentKeyAssertion) {
        case (nil, nil): break
        case (let keyId?, let assertion?):
            proof = .init(keyId: try bytes(keyId, "currentKeyId"), assertion: try bytes(assertion, "currentKeyAssertion"))
        default: throw APIError.invalidBody([.init(pointer: "/currentKeyAssertion", detail: "currentKeyId and currentKeyAssertion go together")])
        }
        let (record, replaced) = try await gate.attest(
            device: DeviceKey(appId: body.appId, deviceId: body.deviceId),
            keyId: bytes(body.keyId, "keyId"),
            attestation: bytes(body.attestation, "attestation"),
            challenge: bytes(body.challenge, "challenge"),
            proof: proof
        )
        if let replaced {
            context.logger.notice("Device key replaced", metadata: ["app.id": "\(body.appId)"])
            await audit?.record(
                context,
                "attestation.replace",
                "\(body.appId)/\(body.deviceId): \(Data(replaced).base64EncodedString()) -> \(Data(record.keyId).base64EncodedString())"
            )
        }
        context.logger.info("Device attested", metadata: ["app.id": "\(body.appId)", "attestation.environment": "\(record.environment)"])
        return try JSONResponse.make(
            AttestedDTO(
                deviceId: body.deviceId,
                keyId: Data(record.keyId).base64EncodedString(),
                environment: record.environment,
                attestedAt: record.attestedAt.rfc3339
            ),
            status: .created
        )
    }

    struct TokenBody: Decodable {
        var appId: String
        var deviceId: String
        var keyId: String
        var challenge: String
        var assertion: String
    }

    struct TokenDTO: Encodable {
        var token: String
        var expiresAt: String
    }

    /// `POST /v1/attest/token`: an attested device proves its key once (an assertion over a fresh challenge) and
    /// gets a token that stands for an assertion on its uploads until it expires.
    func token(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.ingest)
        let body = try await JSONRequest.decode(
            TokenBody.self,
            from: request,
            shape: #"{"appId", "deviceId", "keyId", "challenge", "assertion"} (the last three base64)"#
        )
        let gate = try admit(appId: body.appId, deviceId: body.deviceId, context: context)
        let device = DeviceKey(appId: body.appId, deviceId: body.deviceId)
        let issued = try await gate.issueToken(
            device: device,
            keyId: Self.bytes(body.keyId, "keyId"),
            challenge: Self.bytes(body.challenge, "challenge"),
            assertion: Self.bytes(body.assertion, "assertion")
        )
        context.logger.debug("Device token issued", metadata: ["app.id": "\(body.appId)"])
        return try JSONResponse.secret(TokenDTO(token: issued.token, expiresAt: issued.expiresAt.rfc3339), status: .created)
    }

    /// Standard base64 of a body field, not empty; `400` naming the field otherwise.
    static func bytes(_ text: String, _ name: String) throws(APIError) -> [UInt8] {
        guard let data = Data(base64Encoded: text), !data.isEmpty else {
            throw .invalidBody([.init(pointer: "/\(name)", detail: "must be standard base64")])
        }
        return Array(data)
    }

    /// An app id as events name them.
    static func check(appId: String) throws(APIError) {
        guard DeviceKey.isValidId(appId) else {
            throw APIError.invalidBody([.init(pointer: "/appId", detail: "must be 1-128 characters of A-Z a-z 0-9 . _ : -")])
        }
    }
}
