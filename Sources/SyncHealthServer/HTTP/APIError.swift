import Foundation
import HTTPTypes
import Hummingbird
public import SyncHealthAttest
public import SyncHealthCore

/// Every error the API answers with, mapped to its status and problem details in one place.
public enum APIError: Error, Sendable {
    case invalidBody([BatchValidationError.Item])
    case invalidQuery(name: String, detail: String)
    case bodyTooLarge(limit: Int)
    case unsupportedEncoding(String)
    case unsupportedMediaType(String)
    case unauthorized
    case forbidden(required: KeyScope)
    case appNotAllowed(appId: String)
    /// A key limited to apps asked for something beyond them: another app, or every app.
    case outOfScope(String)
    /// A configured key cannot be deleted through the API.
    case configuredKey
    /// `POST /v1/keys` when `limit` live keys already name one of the new key's apps (or, `global`, are for every app).
    case keyLimit(limit: Int, global: Bool)
    case notFound(String)
    case ambiguousDevice(String)
    case rateLimited(retryAfterSeconds: Int, limit: Int)
    case overloaded(retryAfterSeconds: Int)
    case unavailable(String)
    case routeNotFound
    case methodNotAllowed(allow: String)
    /// `GET /v1/backup` on a store that is backed up with its database's own tools (PostgreSQL).
    case backupUnsupported
    case backupRunning
    /// An App Attest step refused an attestation or an upload's assertion.
    case attestation(AppAttestFailure)
    /// `POST /v1/attest…` for an app that `SYNCHEALTH_APP_ATTEST` does not list.
    case attestationNotConfigured(appId: String)
    /// `POST /v1/attest` for a device id bound to another key, without a proof from that key.
    case attestationDeviceBound(deviceId: String)
    /// `POST /v1/attest` with a key already attested for another device.
    case attestationKeyInUse
    /// An upload's `SyncHealth-Device-Token` was refused.
    case deviceToken(DeviceTokenFailure)

    var status: HTTPResponse.Status {
        switch self {
        case .invalidBody, .invalidQuery: .badRequest
        case .bodyTooLarge: .contentTooLarge
        case .unsupportedEncoding, .unsupportedMediaType: .unsupportedMediaType
        case .unauthorized: .unauthorized
        case .forbidden, .appNotAllowed, .outOfScope: .forbidden
        case .configuredKey, .keyLimit: .conflict
        case .notFound, .routeNotFound: .notFound
        case .ambiguousDevice: .conflict
        case .rateLimited: .tooManyRequests
        case .overloaded, .unavailable: .serviceUnavailable
        case .methodNotAllowed: .methodNotAllowed
        case .backupUnsupported: .notImplemented
        case .backupRunning: .conflict
        case .attestation(.malformed), .attestation(.assertionMalformed): .badRequest
        case .attestation(.busy): .serviceUnavailable
        case .attestation, .deviceToken: .unauthorized
        case .attestationNotConfigured, .attestationDeviceBound, .attestationKeyInUse: .conflict
        }
    }

    var problem: Problem {
        switch self {
        case .invalidBody(let items):
            Problem(
                slug: "validation",
                title: "The request body is invalid",
                status: status,
                detail: items.first.map { "\($0.pointer.isEmpty ? "body" : $0.pointer): \($0.detail)" } ?? "invalid body",
                errors: items
            )
        case .invalidQuery(let name, let detail):
            Problem(
                slug: "validation",
                title: "A query parameter is invalid",
                status: status,
                detail: "\(name): \(detail)",
                errors: [.init(pointer: "/query/\(name)", detail: detail)]
            )
        case .bodyTooLarge(let limit):
            Problem(
                slug: "body-too-large",
                title: "The request body is too large",
                status: status,
                detail: "The body must be at most \(limit) bytes after decompression."
            )
        case .unsupportedEncoding(let encoding):
            Problem(
                slug: "unsupported-encoding",
                title: "Unsupported content encoding",
                status: status,
                detail: "Content-Encoding \(encoding) is not supported; use gzip or none."
            )
        case .unsupportedMediaType(let type):
            Problem(
                slug: "unsupported-media-type",
                title: "Unsupported media type",
                status: status,
                detail: "Content-Type \(type) is not supported; send application/json."
            )
        case .unauthorized:
            Problem(
                slug: "unauthorized",
                title: "Missing or unknown API key",
                status: status,
                detail: "Send a valid key as Authorization: Bearer <key>."
            )
        case .forbidden(let required):
            Problem(
                slug: "forbidden",
                title: "The key's scope does not allow this",
                status: status,
                detail:
                    "This operation needs a key of scope \(required.rawValue)\(required == .read ? " or admin" : required == .metrics ? ", read or admin" : "")."
            )
        case .appNotAllowed(let appId):
            Problem(
                slug: "app-not-allowed",
                title: "The key may not post for this app",
                status: status,
                detail: "This ingest key is bound to other apps than \(appId); nothing was applied."
            )
        case .outOfScope(let detail):
            Problem(slug: "out-of-scope", title: "The key is limited to other apps", status: status, detail: detail)
        case .configuredKey:
            Problem(
                slug: "configured-key",
                title: "A configured key cannot be deleted here",
                status: status,
                detail:
                    "This key comes from the service's configuration (SYNCHEALTH_INGEST_KEYS, _READ_KEYS, _ADMIN_KEYS or _METRICS_KEY): "
                    + "remove it there and restart every replica. Keys made with POST /v1/keys are revoked with DELETE."
            )
        case .keyLimit(let limit, let global):
            Problem(
                slug: "key-limit",
                title: "Too many live keys",
                status: status,
                detail: (global ? "\(limit) live keys for every app" : "\(limit) live keys for one of these apps")
                    + " already exist (SYNCHEALTH_KEY_LIMIT): revoke keys that are no longer used (DELETE /v1/keys/{id})."
            )
        case .notFound(let what):
            Problem(slug: "not-found", title: "Not found", status: status, detail: what)
        case .ambiguousDevice(let id):
            Problem(
                slug: "ambiguous-device",
                title: "The device id is not unique",
                status: status,
                detail: "Several apps have a device \(id); pass appId."
            )
        case .rateLimited(let seconds, _):
            Problem(slug: "rate-limited", title: "Too many requests", status: status, detail: "Retry after \(seconds) s.")
        case .overloaded(let seconds):
            Problem(slug: "overloaded", title: "The service is overloaded", status: status, detail: "Retry after \(seconds) s.")
        case .unavailable(let why):
            Problem(slug: "unavailable", title: "The service cannot answer now", status: status, detail: why)
        case .routeNotFound:
            Problem(slug: "not-found", title: "Not found", status: status, detail: "No such endpoint.")
        case .methodNotAllowed(let allow):
            Problem(slug: "method-not-allowed", title: "Method not allowed", status: status, detail: "This endpoint takes \(allow).")
        case .backupUnsupported:
            Problem(
                slug: "backup-unsupported",
                title: "Back up the database itself",
                status: status,
                detail: "This service keeps its data in PostgreSQL: back it up with pg_dump (docs/operations.md, Backup and restore)."
            )
        case .backupRunning:
            Problem(
                slug: "backup-running",
                title: "A backup is being taken",
                status: status,
                detail: "One backup is taken at a time: retry once the running one is sent."
            )
        case .attestation(let failure):
            failure.problem(status: status)
        case .attestationDeviceBound(let deviceId):
            Problem(
                slug: "attestation-device-bound",
                title: "This device id is bound to another key",
                status: status,
                detail: """
                    \(deviceId) was attested with another key. Send currentKeyId and currentKeyAssertion (an assertion of that \
                    key over this challenge), or have an admin erase the device (DELETE /v1/devices/{deviceId}) first.
                    """
            )
        case .deviceToken(let failure):
            switch failure {
            case .malformed:
                Problem(
                    slug: failure.slug,
                    title: "The device token cannot be read",
                    status: status,
                    detail: "Ask for a new one (POST /v1/attest/token)."
                )
            case .forged:
                Problem(
                    slug: failure.slug,
                    title: "The device token was not made by this service",
                    status: status,
                    detail: "Its signature does not verify with any secret of this service. Ask for a new one; nothing was applied."
                )
            case .expired:
                Problem(
                    slug: failure.slug,
                    title: "The device token has expired",
                    status: status,
                    detail: "Ask for a new one (POST /v1/attest/token)."
                )
            case .otherDevice:
                Problem(
                    slug: failure.slug,
                    title: "The device token was made for another device",
                    status: status,
                    detail: "A token names one app and one device id; nothing was applied."
                )
            case .revoked:
                Problem(
                    slug: failure.slug,
                    title: "The device token's key is no longer the device's",
                    status: status,
                    detail: "The key was replaced or the device erased: attest again and ask for a new token."
                )
            }
        case .attestationKeyInUse:
            Problem(
                slug: "attestation-key-in-use",
                title: "This key is attested for another device",
                status: status,
                detail: "One key attests one device id: generate a new key for this device."
            )
        case .attestationNotConfigured(let appId):
            Problem(
                slug: "attestation-not-configured",
                title: "App Attest is not configured for this app",
                status: status,
                detail: "SYNCHEALTH_APP_ATTEST does not list \(appId): its devices post without attesting."
            )
        }
    }

    /// Extra headers the status calls for.
    var headers: HTTPFields {
        var fields = HTTPFields()
        switch self {
        case .unauthorized: fields[.wwwAuthenticate] = "Bearer"
        case .rateLimited(let s, let limit):
            fields[.retryAfter] = String(s)
            fields.set("RateLimit-Limit", String(limit))
            fields.set("RateLimit-Remaining", "0")
            fields.set("RateLimit-Reset", String(s))
        case .overloaded(let s): fields[.retryAfter] = String(s)
        case .unavailable: fields[.retryAfter] = "1"
        case .methodNotAllowed(let allow): fields[.allow] = allow
        default: break
        }
        return fields
    }
}

/// RFC 9457 problem details.
struct Problem: Encodable {
    var type: String
    var title: String
    var status: Int
    var detail: String
    var errors: [BatchValidationError.Item]?

    init(slug: String, title: String, status: HTTPResponse.Status, detail: String, errors: [BatchValidationError.Item]? = nil) {
        self.type = "urn:synchealth:problem:\(slug)"
        self.title = title
        self.status = status.code
        self.detail = detail
        self.errors = errors
    }

    /// A bare 500: nothing about the cause leaks to the client.
    static let internalError = Problem(
        slug: "internal",
        title: "Internal server error",
        status: .internalServerError,
        detail: "The error was logged."
    )

    func response(extraHeaders: HTTPFields = [:]) -> Response {
        let data = (try? JSONResponse.encoder.encode(self)) ?? Data()
        var headers = extraHeaders
        headers[.contentType] = "application/problem+json"
        return Response(status: .init(code: status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

extension HTTPFields {
    /// Sets a header by name; a name that is not a valid token is skipped (never a trap).
    mutating func set(_ name: String, _ value: String) {
        if let field = HTTPField.Name(name) { self[field] = value }
    }
}

extension AppAttestFailure {
    /// Each step its own problem type, so that a device (and ops reading the logs) can tell what failed.
    func problem(status: HTTPResponse.Status) -> Problem {
        switch self {
        case .malformed(let why): Problem(slug: slug, title: "The attestation cannot be read", status: status, detail: why)
        case .certificateChain(let why):
            Problem(slug: slug, title: "The attestation's certificates do not chain to Apple's root", status: status, detail: why)
        case .nonce:
            Problem(
                slug: slug,
                title: "The attestation was not made for this challenge",
                status: status,
                detail: "The credential certificate's nonce is not SHA-256(authData ‖ SHA-256(challenge))."
            )
        case .keyId:
            Problem(
                slug: slug,
                title: "The key id does not match the attested key",
                status: status,
                detail: "keyId, the SHA-256 of the certificate's public key and the credential id must be equal."
            )
        case .appId:
            Problem(
                slug: slug,
                title: "The key was made for another app",
                status: status,
                detail: "The App ID hash is another app's."
            )
        case .counter:
            Problem(slug: slug, title: "The attestation's counter is not 0", status: status, detail: "A new key's counter is 0.")
        case .environment(let why):
            Problem(slug: slug, title: "The key's App Attest environment is not accepted", status: status, detail: why)
        case .challenge(let why):
            Problem(slug: slug, title: "The challenge cannot be redeemed", status: status, detail: why)
        case .assertionMalformed(let why):
            Problem(slug: slug, title: "The assertion cannot be read", status: status, detail: why)
        case .signature:
            Problem(
                slug: slug,
                title: "The assertion's signature does not verify",
                status: status,
                detail: "The signature is not the device key's over this body; nothing was applied."
            )
        case .replayed:
            Problem(
                slug: slug,
                title: "The assertion was used before",
                status: status,
                detail: "Its counter is not above the last accepted one: sign each upload, retries included, anew. Nothing was applied."
            )
        case .unknownKey:
            Problem(
                slug: slug,
                title: "No attested key of this device has this id",
                status: status,
                detail: "Attest the key (POST /v1/attest) before signing uploads with it; nothing was applied."
            )
        case .required:
            Problem(
                slug: slug,
                title: "This app's uploads must be attested",
                status: status,
                detail: "Send SyncHealth-Key-Id and SyncHealth-Assertion (App Attest); nothing was applied."
            )
        case .busy:
            Problem(
                slug: slug,
                title: "The service is verifying too many attestations",
                status: status,
                detail: "Nothing was decided: post the same attestation again later."
            )
        }
    }
}
