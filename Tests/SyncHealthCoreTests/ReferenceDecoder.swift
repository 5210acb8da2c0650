import Foundation

@testable import SyncHealthCore

/// The event decoder as it was before the byte-level one: Foundation's `JSONDecoder` over `Decodable` types.
/// Kept here as the reference that the differential tests compare the production decoder against.

enum ReferenceDecoder {
    /// Control characters (C0, DEL, C1) and Unicode's format characters (category Cf), scalar by scalar.
    static func forbidden(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.properties.generalCategory == .format
    }

    /// Decodes and validates a JSON body. Each event is judged alone; only a bad envelope throws.
    static func decode(json: Data) throws(BatchValidationError) -> EventBatch {
        let envelope: ReferenceEnvelope
        do {
            envelope = try JSONDecoder().decode(ReferenceEnvelope.self, from: json)
        } catch let error as DecodingError {
            throw BatchValidationError([.init(pointer: Self.pointer(error), detail: Self.detail(error))])
        } catch {
            throw BatchValidationError([.init(pointer: "", detail: "the body is not valid JSON")])
        }
        guard let device = envelope.device else { throw BatchValidationError([.init(pointer: "/device", detail: "device is required")]) }
        var problems: [BatchValidationError.Item] = []
        for (name, value) in [("deviceId", device.deviceId), ("appId", device.appId)] {
            guard let value else {
                problems.append(.init(pointer: "/device/\(name)", detail: "\(name) is required"))
                continue
            }
            if !DeviceKey.isValidId(value) {
                problems.append(.init(pointer: "/device/\(name)", detail: "\(name) must be 1-128 characters of A-Z a-z 0-9 . _ : -"))
            }
        }
        for (name, value) in [
            ("containerId", device.containerId), ("platform", device.platform), ("osVersion", device.osVersion), ("appVersion", device.appVersion),
        ] {
            if let value, value.count > EventBatch.Limits.maxFieldLength {
                problems.append(.init(pointer: "/device/\(name)", detail: "\(name) is longer than \(EventBatch.Limits.maxFieldLength) characters"))
            } else if let value, value.unicodeScalars.contains(where: Self.forbidden) {
                problems.append(
                    .init(
                        pointer: "/device/\(name)",
                        detail:
                            "\(name) must not hold control or format characters (U+0000-U+001F, U+007F-U+009F, Unicode category Cf such as U+200B or U+202E)"
                    )
                )
            }
        }
        guard let rawEvents = envelope.events else {
            problems.append(.init(pointer: "/events", detail: "events is required"))
            throw BatchValidationError(problems)
        }
        if rawEvents.isEmpty || rawEvents.count > EventBatch.Limits.maxEvents {
            problems.append(.init(pointer: "/events", detail: "events must hold 1 to \(EventBatch.Limits.maxEvents) events"))
        }
        guard problems.isEmpty, let deviceId = device.deviceId, let appId = device.appId else {
            throw BatchValidationError(problems)
        }
        var events: [DeviceEvent] = []
        events.reserveCapacity(rawEvents.count)
        var rejected: [EventBatch.Rejection] = []
        for (index, raw) in rawEvents.enumerated() {
            switch raw.result {
            case .success(let event): events.append(event)
            case .failure(let problem): rejected.append(EventBatch.Rejection(index: index, detail: problem.detail))
            }
        }
        return EventBatch(
            key: DeviceKey(appId: appId, deviceId: deviceId),
            info: DeviceInfo(containerId: device.containerId, platform: device.platform, osVersion: device.osVersion, appVersion: device.appVersion),
            events: events,
            rejected: rejected
        )
    }

    static func pointer(_ error: DecodingError) -> String {
        let path: [any CodingKey]
        switch error {
        case .typeMismatch(_, let c), .valueNotFound(_, let c), .dataCorrupted(let c): path = c.codingPath
        case .keyNotFound(let key, let c): path = c.codingPath + [key]
        @unknown default: path = []
        }
        return path.map { "/" + ($0.intValue.map(String.init) ?? $0.stringValue) }.joined()
    }

    static func detail(_ error: DecodingError) -> String {
        switch error {
        case .typeMismatch(let type, _): "expected \(Self.jsonTypeName(type))"
        case .valueNotFound(let type, _): "expected \(Self.jsonTypeName(type)), found null"
        case .keyNotFound(let key, _): "\(key.stringValue) is required"
        case .dataCorrupted: "the body is not valid JSON"
        @unknown default: "the body is not a valid batch"
        }
    }

    static func jsonTypeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "a boolean"
        case is Int.Type, is Double.Type: "a number"
        case is [ReferenceRawEvent].Type: "an array"
        default: "an object"
        }
    }
}

/// The envelope with every field optional, so that missing fields get a precise error.
struct ReferenceEnvelope: Decodable {
    var device: ReferenceRawDevice?
    var events: [ReferenceRawEvent]?
}

struct ReferenceRawDevice: Decodable {
    var deviceId: String?
    var appId: String?
    var containerId: String?
    var platform: String?
    var osVersion: String?
    var appVersion: String?
}

struct ReferenceEventProblem: Error {
    var detail: String
}

/// One event, decoded without ever failing the whole batch: `result` holds the event or why it is invalid.
struct ReferenceRawEvent: Decodable {
    var result: Result<DeviceEvent, ReferenceEventProblem>

    enum Key: String, CodingKey {
        case eventId, occurredAt, kind, phase, state, startedAt, endedAt, activityId, error
        case available, status, pendingChanges, oldestPendingAt, clientSummary
    }

    enum ErrorKey: String, CodingKey {
        case domain, code, message, retryAfterSeconds, partialErrors
    }

    init(from decoder: any Decoder) {
        do {
            result = .success(try Self.decodeEvent(decoder))
        } catch let problem as ReferenceEventProblem {
            result = .failure(problem)
        } catch {
            result = .failure(ReferenceEventProblem(detail: "an event must be a JSON object"))
        }
    }

    static func field<T: Decodable>(_ c: KeyedDecodingContainer<Key>, _ key: Key, _ type: T.Type) throws -> T? {
        do {
            return try c.decodeIfPresent(type, forKey: key)
        } catch {
            throw ReferenceEventProblem(detail: "\(key.rawValue) must be \(ReferenceDecoder.jsonTypeName(type))")
        }
    }

    static func required<T: Decodable>(_ c: KeyedDecodingContainer<Key>, _ key: Key, _ type: T.Type) throws -> T {
        guard let value = try field(c, key, type) else { throw ReferenceEventProblem(detail: "\(key.rawValue) is required") }
        return value
    }

    static func timestamp(_ c: KeyedDecodingContainer<Key>, _ key: Key) throws -> Timestamp? {
        guard let text = try field(c, key, String.self) else { return nil }
        guard let time = Timestamp(rfc3339: text) else {
            throw ReferenceEventProblem(detail: "\(key.rawValue) must be an RFC 3339 date-time")
        }
        return time
    }

    static func enumValue<E: RawRepresentable & CaseIterable>(_ c: KeyedDecodingContainer<Key>, _ key: Key, _ type: E.Type) throws -> E
    where E.RawValue == String {
        let text = try required(c, key, String.self)
        guard let value = E(rawValue: text) else {
            throw ReferenceEventProblem(detail: "\(key.rawValue) must be one of " + E.allCases.map(\.rawValue).joined(separator: ", "))
        }
        return value
    }

    static func decodeEvent(_ decoder: any Decoder) throws -> DeviceEvent {
        let c = try decoder.container(keyedBy: Key.self)
        let eventId = try required(c, .eventId, String.self)
        guard !eventId.isEmpty, eventId.utf8.count <= EventBatch.Limits.maxIdLength else {
            throw ReferenceEventProblem(detail: "eventId must be 1-\(EventBatch.Limits.maxIdLength) characters")
        }
        guard let occurredAt = try timestamp(c, .occurredAt) else { throw ReferenceEventProblem(detail: "occurredAt is required") }
        let kind = try required(c, .kind, String.self)
        let body: DeviceEvent.Body
        switch kind {
        case "activity":
            let phase = try enumValue(c, .phase, Phase.self)
            let state = try enumValue(c, .state, ActivityState.self)
            let activityId = try field(c, .activityId, String.self)
            if let activityId, activityId.utf8.count > EventBatch.Limits.maxIdLength {
                throw ReferenceEventProblem(detail: "activityId must be at most \(EventBatch.Limits.maxIdLength) characters")
            }
            let startedAt = try timestamp(c, .startedAt)
            let endedAt = state == .started ? nil : try timestamp(c, .endedAt)
            let error = try decodeError(c)
            body = .activity(.init(phase: phase, state: state, startedAt: startedAt, endedAt: endedAt, activityId: activityId, error: error))
        case "network":
            body = .network(available: try required(c, .available, Bool.self))
        case "account":
            body = .account(try enumValue(c, .status, AccountStatus.self))
        case "pending":
            let count = try required(c, .pendingChanges, Int.self)
            guard count >= 0 else { throw ReferenceEventProblem(detail: "pendingChanges must be an integer >= 0") }
            body = .pending(count: count, oldestPendingAt: try timestamp(c, .oldestPendingAt))
        case "heartbeat":
            let summary = try field(c, .clientSummary, String.self)
            body = .heartbeat(clientSummary: summary.flatMap(SyncStateSummary.init(rawValue:)))
        default:
            throw ReferenceEventProblem(detail: "kind must be one of activity, network, account, pending, heartbeat")
        }
        return DeviceEvent(eventId: eventId, occurredAt: occurredAt, body: body)
    }

    static func decodeError(_ c: KeyedDecodingContainer<Key>) throws -> SyncErrorReport? {
        guard c.contains(.error), !((try? c.decodeNil(forKey: .error)) ?? false) else { return nil }
        let e: KeyedDecodingContainer<ErrorKey>
        do {
            e = try c.nestedContainer(keyedBy: ErrorKey.self, forKey: .error)
        } catch {
            throw ReferenceEventProblem(detail: "error must be an object")
        }
        func get<T: Decodable>(_ key: ErrorKey, _ type: T.Type) throws -> T? {
            do { return try e.decodeIfPresent(type, forKey: key) } catch {
                throw ReferenceEventProblem(detail: "error.\(key.rawValue) must be \(ReferenceDecoder.jsonTypeName(type))")
            }
        }
        guard let domain = try get(.domain, String.self), !domain.isEmpty, domain.utf8.count <= EventBatch.Limits.maxFieldLength else {
            throw ReferenceEventProblem(detail: "error.domain is required (1-\(EventBatch.Limits.maxFieldLength) characters)")
        }
        if domain.unicodeScalars.contains(where: ReferenceDecoder.forbidden) {
            throw ReferenceEventProblem(
                detail:
                    "error.domain must not hold control or format characters (U+0000-U+001F, U+007F-U+009F, Unicode category Cf such as U+200B or U+202E)"
            )
        }
        guard let code = try get(.code, Int.self) else { throw ReferenceEventProblem(detail: "error.code is required") }
        let message = try get(.message, String.self).map { String($0.prefix(EventBatch.Limits.maxMessageLength)) }
        let retryAfter = try get(.retryAfterSeconds, Double.self)
        var partial: [Int: Int]?
        if let raw = try get(.partialErrors, [String: Int].self) {
            var items: [Int: Int] = [:]
            for (key, count) in raw.prefix(64) {
                guard let itemCode = Int(key), count >= 0 else {
                    throw ReferenceEventProblem(detail: "error.partialErrors maps error codes to counts >= 0")
                }
                items[itemCode] = count
            }
            partial = items
        }
        return SyncErrorReport(domain: domain, code: code, message: message, retryAfterSeconds: retryAfter, partialErrors: partial)
    }
}
