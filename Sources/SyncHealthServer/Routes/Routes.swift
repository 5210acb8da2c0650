import CZlib
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOFoundationEssentialsCompat
import NIOPosix
import SyncHealthAttest
import SyncHealthCore
import SyncHealthEngine
import SyncHealthStore

/// JSON responses.
enum JSONResponse {
    /// One encoder for every response: keys sorted, so output is stable.
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    static func make<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok, contentType: String = "application/json") throws -> Response {
        let data = try encoder.encode(value)
        return Response(status: status, headers: [.contentType: contentType], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// An answer that carries a secret (a key, a signing secret): `Cache-Control: no-store`, so that no cache or
    /// browser keeps a copy.
    static func secret<T: Encodable>(_ value: T, status: HTTPResponse.Status) throws -> Response {
        var response = try make(value, status: status)
        response.headers[.cacheControl] = "no-store"
        return response
    }
}

/// Typed access to query parameters; every bad value is a 400 naming the parameter.
struct Query {
    let parameters: FlatDictionary<Substring, Substring>

    init(_ request: Request) { parameters = request.uri.queryParameters }

    func string(_ name: String) throws(APIError) -> String? {
        guard let value = parameters[Substring(name)] else { return nil }
        let text = String(value)
        guard !text.isEmpty, text.utf8.count <= 256 else { throw .invalidQuery(name: name, detail: "must be 1-256 characters") }
        return text
    }

    /// An `appId` or `deviceId`: 1-128 characters of `A-Z a-z 0-9 . _ : -`.
    func identifier(_ name: String) throws(APIError) -> String? {
        guard let text = try string(name) else { return nil }
        guard DeviceKey.isValidId(text) else { throw .invalidQuery(name: name, detail: "must be 1-128 characters of A-Z a-z 0-9 . _ : -") }
        return text
    }

    func enumValue<E: RawRepresentable & CaseIterable>(_ name: String, _: E.Type) throws(APIError) -> E? where E.RawValue == String {
        guard let text = try string(name) else { return nil }
        guard let value = E(rawValue: text) else {
            throw .invalidQuery(name: name, detail: "must be one of " + E.allCases.map(\.rawValue).joined(separator: ", "))
        }
        return value
    }

    func bool(_ name: String) throws(APIError) -> Bool? {
        switch try string(name) {
        case nil: return nil
        case "true": return true
        case "false": return false
        default: throw .invalidQuery(name: name, detail: "must be true or false")
        }
    }

    func limit(default value: Int = 100, max: Int = 1000) throws(APIError) -> Int {
        guard let text = try string("limit") else { return value }
        guard let n = Int(text), n >= 1, n <= max else { throw .invalidQuery(name: "limit", detail: "must be an integer from 1 to \(max)") }
        return n
    }

    func cursor() throws(APIError) -> Int64? {
        guard let text = try string("cursor") else { return nil }
        guard let n = Int64(text), n >= 0 else { throw .invalidQuery(name: "cursor", detail: "must be a nextCursor from a previous page") }
        return n
    }
}

extension EngineError {
    /// The API error for an engine error.
    var apiError: APIError {
        switch self {
        case .overloaded: .overloaded(retryAfterSeconds: 1)
        case .storeUnavailable: .unavailable("The store could not commit; nothing was applied. Retry.")
        case .stopping: .unavailable("The service is shutting down.")
        case .starting: .unavailable("The service is loading its state.")
        }
    }
}

/// The small JSON bodies of the management endpoints.
/// A store call made by a route itself: a store failure is a 503, as for every other store access.
func storeCall<T>(_ body: () async throws -> T) async throws -> T {
    do { return try await body() } catch let error as APIError { throw error } catch { throw EngineError.storeUnavailable }
}

enum JSONRequest {
    /// The largest management body read.
    static let maxBodySize = 64 * 1024

    /// Reads at most `maxBodySize` and decodes it; a larger body is a 413 naming this limit, anything that does not
    /// decode is a 400 naming the expected `shape`.
    static func decode<T: Decodable>(_ type: T.Type, from request: Request, shape: String) async throws -> T {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: maxBodySize)
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            throw APIError.bodyTooLarge(limit: maxBodySize)
        }
        do {
            return try JSONDecoder().decode(type, from: Data(buffer: buffer))
        } catch {
            throw APIError.invalidBody([.init(pointer: "", detail: "the body must be \(shape)")])
        }
    }
}

/// A device's rate-limit bucket: its attested uploads and its other uploads are limited apart.
struct DeviceBucket: Hashable, Sendable {
    var device: DeviceKey
    var attested: Bool
}

/// `POST /v1/events`.
struct EventsRoutes<Engine: MonitorEngine> {
    let engine: Engine
    let deviceLimiter: RateLimiter<DeviceBucket>
    /// App Attest's check of each upload's assertion; `nil` where the service was built without it (router tests).
    var attestation: AppAttestGate? = nil

    func ingest(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.ingest)
        if let type = request.headers.value(.contentType), !type.hasPrefixIgnoringASCIICase("application/json") {
            throw APIError.unsupportedMediaType(type)
        }
        var body = try await request.body.collect(upTo: IngestBody.maxBodySize)
        // An assertion signs the body exactly as sent, before any gzip is undone.
        let sent = body
        switch request.headers.value(.contentEncoding)?.lowercased().trimmingCharacters(in: .whitespaces) {
        case nil, "", "identity":
            break
        case "gzip", "x-gzip":
            body = try IngestBody.gunzip(&body)
        case let other?:
            throw APIError.unsupportedEncoding(other)
        }
        let decoded = try await IngestBody.decode(body)
        var batch: EventBatch
        switch decoded {
        case .success(let value): batch = value
        case .failure(let error): throw APIError.invalidBody(error.errors)
        }
        if let apps = context.allowedApps, !apps.contains(batch.key.appId) { throw APIError.appNotAllowed(appId: batch.key.appId) }
        // Attestation first, and a bucket for attested uploads apart from the rest: unsigned requests naming a
        // genuine device (anyone with the ingest key can send them) cannot use up that device's limit.
        if let attestation {
            batch.attested = try await attestation.check(batch.key, appVersion: batch.info.appVersion, headers: request.headers, body: sent)
        }
        let decision = deviceLimiter.take(DeviceBucket(device: batch.key, attested: batch.attested), now: engine.now)
        guard decision.allowed else {
            throw APIError.rateLimited(retryAfterSeconds: decision.retryAfterSeconds, limit: Int(deviceLimiter.limit?.burst ?? 0))
        }
        let receipt: IngestReceipt
        do {
            receipt = try await engine.ingest(batch)
        } catch {
            throw error.apiError
        }
        context.logger.debug("Events ingested", metadata: ["device.id": "\(batch.key.deviceId)", "events.accepted": "\(receipt.accepted)"])
        return try IngestBody.response(receipt, rejected: batch.rejected)
    }
}

/// The wire format of `POST /v1/events` around the engine: the body's limit, gzip, the `202` answer.
enum IngestBody {
    /// Largest body, after decompression.
    static let maxBodySize = 1 << 20

    /// Bodies larger than this are decoded on `decodingThread`, not on the task's thread.
    static let inlineDecodeLimit = 64 * 1024

    /// Where large bodies are decoded: one thread of its own, started once for the process's life like NIO's
    /// singleton pool. Decoding a large body takes milliseconds; on the concurrency pool (a thread per core) two
    /// at once would hold up every other request, `/livez` included. Here they queue behind each other and leave
    /// the pool free; the bodies devices send (a few events) stay inline, where a hop would cost more than the work.
    static let decodingThread: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        return pool
    }()

    /// Decodes and validates a body: inline when small, on `decodingThread` when large.
    static func decode(_ body: ByteBuffer) async throws -> Result<EventBatch, BatchValidationError> {
        @Sendable func decode() -> Result<EventBatch, BatchValidationError> {
            body.withUnsafeReadableBytes { bytes in Result { () throws(BatchValidationError) in try EventBatch.decode(utf8: bytes) } }
        }
        guard body.readableBytes > inlineDecodeLimit else { return decode() }
        return try await decodingThread.runIfActive(decode)
    }

    /// The `202` answer.
    static func response(_ receipt: IngestReceipt, rejected: [EventBatch.Rejection]) throws -> Response {
        Response(status: .accepted, headers: [.contentType: "application/json"], body: .init(byteBuffer: try body(receipt, rejected: rejected)))
    }

    /// The `202` body. Without rejections (the usual case) it is written directly, byte for byte what the
    /// encoder writes (sorted keys, no spaces); `EventsEndpointTests` hold the two equal.
    static func body(_ receipt: IngestReceipt, rejected: [EventBatch.Rejection]) throws -> ByteBuffer {
        guard rejected.isEmpty else {
            return ByteBuffer(
                bytes: try JSONResponse.encoder.encode(
                    IngestResponseDTO(accepted: receipt.accepted, duplicates: receipt.duplicates, rejected: rejected)
                )
            )
        }
        // Written in place: an interpolated string first would cost an allocation of its own.
        var buffer = ByteBufferAllocator().buffer(capacity: 64)
        buffer.writeStaticString(#"{"accepted":"#)
        buffer.writeString(String(receipt.accepted))
        buffer.writeStaticString(#","duplicates":"#)
        buffer.writeString(String(receipt.duplicates))
        buffer.writeStaticString(#","rejected":[]}"#)
        return buffer
    }

    /// Decompresses a gzip body: exactly one gzip member, whole, growing to at most the limit (a zip bomb stops
    /// there). A truncated stream and bytes after the stream are refused and named, not read as JSON.
    static func gunzip(_ body: inout ByteBuffer) throws(APIError) -> ByteBuffer {
        func invalid(_ detail: String) -> APIError { .invalidBody([.init(pointer: "", detail: detail)]) }
        var out = ByteBufferAllocator().buffer(capacity: maxBodySize + 1)
        var result = CZLIB_GUNZIP_CORRUPT
        out.writeWithUnsafeMutableBytes(minimumWritableBytes: maxBodySize + 1) { target in
            body.withUnsafeReadableBytes { source in
                guard let input = source.baseAddress, let output = target.baseAddress else { return 0 }
                var written = 0
                result = czlib_gunzip(
                    input.assumingMemoryBound(to: UInt8.self),
                    source.count,
                    output.assumingMemoryBound(to: UInt8.self),
                    maxBodySize + 1,
                    &written
                )
                return written
            }
        }
        switch result {
        case CZLIB_GUNZIP_OK where out.readableBytes <= maxBodySize: return out
        case CZLIB_GUNZIP_OK, CZLIB_GUNZIP_TOO_LARGE: throw .bodyTooLarge(limit: maxBodySize)
        case CZLIB_GUNZIP_TRUNCATED: throw invalid("the gzip stream is truncated")
        case CZLIB_GUNZIP_TRAILING_BYTES: throw invalid("bytes follow the end of the gzip stream")
        default: throw invalid("the body is not valid gzip")
        }
    }
}

/// `GET /v1/devices`, `GET /v1/devices/{deviceId}`, `DELETE /v1/devices/{deviceId}`.
struct DeviceRoutes<Engine: MonitorEngine> {
    let engine: Engine
    let audit: AuditLog
    /// App Attest's policy and store; `nil` where the service was built without it (router tests).
    var attestation: AppAttestGate? = nil

    /// Whether devices of this app say if they are attested: only apps that `SYNCHEALTH_APP_ATTEST` lists do.
    private func attests(_ appId: String) -> Bool { attestation?.policy.apps[appId] != nil }

    /// The path's device id, decoded and checked.
    private func deviceId(_ context: AppRequestContext) throws(APIError) -> String {
        // Path parameters arrive percent-encoded.
        let rawId = context.parameters.get("deviceId") ?? ""
        let deviceId = rawId.removingPercentEncoding ?? rawId
        guard DeviceKey.isValidId(deviceId) else {
            throw APIError.invalidQuery(name: "deviceId", detail: "must be 1-128 characters of A-Z a-z 0-9 . _ : -")
        }
        return deviceId
    }

    /// Erases one device of one app (the app is required: an erasure names exactly what it erases). `204` whether
    /// or not the device was stored, so that a retried erasure succeeds.
    func erase(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.admin)
        let deviceId = try deviceId(context)
        guard let appId = try Query(request).identifier("appId") else {
            throw APIError.invalidQuery(name: "appId", detail: "is required: an erasure names the app of the device")
        }
        // Another app's device does not exist for a key limited to other apps.
        guard context.sees(appId: appId) else { throw APIError.notFound("No device \(deviceId) in app \(appId).") }
        let key = DeviceKey(appId: appId, deviceId: deviceId)
        _ = try await engine.erase(key)
        if let attestation {
            // Its tokens are refused here at once; the other replicas read the revocation the store keeps.
            let erased = try await storeCall { try await attestation.store.attestation(of: key) }
            try await storeCall { try await attestation.store.deleteAttestation(of: key, at: engine.now) }
            attestation.keys.forget(device: key)
            if let erased { attestation.tokens?.revoke(erased.keyId, at: engine.now) }
        }
        await audit.record(context, "device.erase", "\(appId)/\(deviceId)")
        return Response(status: .noContent)
    }

    func status(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.read)
        let deviceId = try deviceId(context)
        let query = Query(request)
        let key: DeviceKey
        if let appId = try query.identifier("appId") {
            guard context.sees(appId: appId) else { throw APIError.notFound("No device \(deviceId) in app \(appId).") }
            key = DeviceKey(appId: appId, deviceId: deviceId)
        } else {
            let matches = try await engine.devices(withId: deviceId).filter { context.sees(appId: $0.appId) }
            guard let only = matches.first else { throw APIError.notFound("No device \(deviceId).") }
            guard matches.count == 1 else { throw APIError.ambiguousDevice(deviceId) }
            key = only
        }
        guard let snapshot = try await engine.device(key) else {
            throw APIError.notFound("No device \(deviceId) in app \(key.appId).")
        }
        guard let gate = attestation, attests(key.appId) else { return try JSONResponse.make(DeviceStatusDTO(snapshot: snapshot)) }
        let attested = try await storeCall { try await gate.store.attestation(of: key) }
        return try JSONResponse.make(DeviceStatusDTO(snapshot: snapshot, attestation: .some(attested)))
    }

    func list(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.read)
        let query = Query(request)
        let filter = DeviceFilter(
            summary: try query.enumValue("summary", SyncStateSummary.self),
            broken: try query.bool("broken"),
            appId: try context.app(narrowing: query.identifier("appId")),
            containerId: try query.string("containerId"),
            platform: try query.string("platform"),
            osVersion: try query.string("osVersion"),
            appVersion: try query.string("appVersion")
        )
        let limit = try query.limit()
        let cursor = Int(clamping: try query.cursor() ?? 0)
        let page = try await engine.devices(filter, after: cursor, limit: limit)
        let attesting = page.devices.map(\.record.key).filter { attests($0.appId) }
        let attested = attesting.isEmpty ? [:] : try await storeCall { try await attestation?.store.attestations(of: attesting) } ?? [:]
        let rows = page.devices.map { snapshot -> DeviceStatusDTO in
            let key = snapshot.record.key
            return DeviceStatusDTO(snapshot: snapshot, attestation: attests(key.appId) ? .some(attested[key]) : nil)
        }
        return try JSONResponse.make(PageDTO(data: rows, nextCursor: page.nextCursor.map(String.init)))
    }
}

/// `GET /v1/summary`, `GET /v1/alerts`.
struct FleetRoutes<Engine: MonitorEngine> {
    let engine: Engine
    /// What silences a firing alert (`silencedBy` in the alert list).
    let silences: SilenceCenter
    /// App Attest's policy and store, for the attested counts and each app's mode.
    var attestation: AppAttestGate? = nil

    func summary(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.read)
        let query = Query(request)
        let scope = FleetScope(appId: try context.app(narrowing: query.identifier("appId")), containerId: try query.string("containerId"))
        let counts = try await engine.summary(scope)
        // Attested devices are counted where some app attests: the summary of a service without App Attest, or of an
        // app that does not attest, is what it was.
        var attested: [String: Int]?
        if let gate = attestation, scope.appId.map({ gate.policy.apps[$0] != nil }) ?? !gate.policy.apps.isEmpty {
            attested = try await storeCall { try await gate.store.attestedDevices(appId: scope.appId) }
        }
        var dto = FleetSummaryDTO(counts: counts, generatedAt: engine.now, attested: attested)
        dto.appAttest = scope.appId.flatMap { attestation?.policy.apps[$0]?.mode.rawValue }
        return try JSONResponse.make(dto)
    }

    func alerts(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.read)
        let query = Query(request)
        let alertQuery = AlertQuery(
            state: try query.enumValue("state", AlertState.self),
            kind: try query.enumValue("kind", AlertKind.self),
            appId: try context.app(narrowing: query.identifier("appId")),
            deviceId: try query.identifier("deviceId"),
            limit: try query.limit(),
            cursor: try query.cursor()
        )
        let page = try await engine.alerts(alertQuery)
        // The devices of the firing alerts, for the silences that match on platform and versions: one read.
        let keys = page.alerts.compactMap { alert in
            alert.state == .firing ? alert.appId.flatMap { app in alert.deviceId.map { DeviceKey(appId: app, deviceId: $0) } } : nil
        }
        let infos = try await engine.records(Array(Set(keys))).mapValues(\.info)
        let now = engine.now
        let data = page.alerts.map { alert in
            guard alert.state == .firing else { return AlertJSON(alert, silencedBy: []) }
            let info = alert.appId.flatMap { app in alert.deviceId.flatMap { infos[DeviceKey(appId: app, deviceId: $0)] } }
            return AlertJSON(alert, silencedBy: silences.silencedBy(alert, info: info, now: now))
        }
        return try JSONResponse.make(PageDTO(data: data, nextCursor: page.nextCursor.map(String.init)))
    }
}
