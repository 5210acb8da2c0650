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
        try Self.check(appId: body.appId)
        guard DeviceKey.isValidId(body.deviceId) else {
            throw APIError.invalidBody([.init(pointer: "/deviceId", detail: "must be 1-128 characters of A-Z a-z 0-9 . _ : -")])
        }
        if let apps = context.allowedApps, !apps.contains(body.appId) { throw APIError.appNotAllowed(appId: body.appId) }
        func bytes(_ text: String, _ name: String) throws(APIError) -> [UInt8] {
            guard let data = Data(base64Encoded: text), !data.isEmpty else {
                throw .invalidBody([.init(pointer: "/\(name)", detail: "must be standard base64")])
            }
            return Array(data)
        }
        guard let gate else { throw APIError.attestationNotConfigured(appId: body.appId) }
        try take(keyLimiter, context.keyId ?? "")
        try take(deviceLimiter, DeviceKey(appId: body.appId, deviceId: body.deviceId))
        let record = try await gate.attest(
            device: DeviceKey(appId: body.appId, deviceId: body.deviceId),
            keyId: bytes(body.keyId, "keyId"),
            attestation: bytes(body.attestation, "attestation"),
            challenge: bytes(body.challenge, "challenge")
        )
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

    /// An app id as events name them.
    static func check(appId: String) throws(APIError) {
        guard DeviceKey.isValidId(appId) else {
            throw APIError.invalidBody([.init(pointer: "/appId", detail: "must be 1-128 characters of A-Z a-z 0-9 . _ : -")])
        }
    }
}
