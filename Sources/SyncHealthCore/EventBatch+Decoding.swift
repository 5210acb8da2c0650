#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

extension EventBatch {
    /// Whether `text` holds a control character (C0, DEL, C1) or a Unicode format character (category Cf: zero-width
    /// and bidirectional marks such as U+200B and U+202E, U+FEFF). Device text travels to logs, Prometheus labels,
    /// the dashboard and chat messages: a line break or escape would be read as structure there, and an invisible or
    /// reordering mark makes one scope look like another (`iCloud.team\u{200B}U`). Identifiers never need either.
    public static func hasControlOrFormatCharacter(_ text: String) -> Bool {
        var ascii = true
        for byte in text.utf8 {
            if byte < 0x20 || byte == 0x7F { return true }
            if byte >= 0x80 { ascii = false }
        }
        guard !ascii else { return false }
        return text.unicodeScalars.contains { (0x80..<0xA0).contains($0.value) || $0.properties.generalCategory == .format }
    }

    /// Decodes and validates a JSON body. Each event is judged alone; only a bad envelope throws.
    ///
    /// One pass of `JSONParser` over the bytes, then validation from the parsed values. A differential test holds its
    /// messages and pointers equal to those of a `JSONDecoder`-based reference decoder.
    public static func decode(json: Data) throws(BatchValidationError) -> EventBatch {
        let result = json.withUnsafeBytes { raw in Result { () throws(BatchValidationError) in try decode(utf8: raw) } }
        return try result.get()
    }

    /// Decodes and validates a JSON body held in memory (a request's buffer, without copying it).
    public static func decode(utf8 bytes: UnsafeRawBufferPointer) throws(BatchValidationError) -> EventBatch {
        let document: JSONDocument
        do {
            document = try JSONDocument.parse(bytes.assumingMemoryBound(to: UInt8.self))
        } catch  where error.limit != nil {
            switch error.limit {
            case .inner?:
                throw BatchValidationError("", "an object or array inside an event holds more than \(JSONParser.maxInnerCount) members or elements")
            case .events?:
                throw BatchValidationError("/events", "events must hold 1 to \(Limits.maxEvents) events")
            default:
                throw BatchValidationError(
                    "",
                    "an object holds more than \(JSONParser.maxInnerCount) members, or an array more than \(JSONParser.maxEnvelopeElements) elements"
                )
            }
        } catch {
            throw BatchValidationError("", "the body is not valid JSON")
        }
        return try decode(document)
    }

    static func decode(_ document: JSONDocument) throws(BatchValidationError) -> EventBatch {
        let root = document.root
        guard document.kind(root) == .object else {
            throw BatchValidationError("", document.isNull(root) ? "expected an object, found null" : "expected an object")
        }
        // Type errors in the envelope are reported one at a time, in field order. The device's fields are kept by
        // their place in `DeviceField`, not in a dictionary: a request reads them about fifteen times.
        var device = DeviceFields()
        var hasDevice = false
        if let value = document.member(root, "device"), !document.isNull(value) {
            guard document.kind(value) == .object else { throw BatchValidationError("/device", "expected an object") }
            hasDevice = true
            for field in DeviceField.allCases {
                guard let member = document.member(value, field.key), !document.isNull(member) else { continue }
                guard let text = document.string(member) else { throw BatchValidationError("/device/\(field.name)", "expected a string") }
                device[field] = text
            }
        }
        var rawEvents: [JSONDocument.Index]?
        if let value = document.member(root, "events") {
            switch document.kind(value) {
            case .null: break
            case .array: rawEvents = document.elements(value)
            default: throw BatchValidationError("/events", "expected an array")
            }
        }
        guard hasDevice else { throw BatchValidationError("/device", "device is required") }

        var problems: [BatchValidationError.Item] = []
        for field in [DeviceField.deviceId, .appId] {
            guard let value = device[field] else {
                problems.append(.init(pointer: "/device/\(field.name)", detail: "\(field.name) is required"))
                continue
            }
            if !DeviceKey.isValidId(value) {
                problems.append(.init(pointer: "/device/\(field.name)", detail: "\(field.name) must be 1-128 characters of A-Z a-z 0-9 . _ : -"))
            }
        }
        for field in [DeviceField.containerId, .platform, .osVersion, .appVersion] {
            guard let value = device[field] else { continue }
            // Characters are at most as many as UTF-8 bytes: counting them (grapheme breaking) is needed only past the limit.
            if value.utf8.count > Limits.maxFieldLength, value.count > Limits.maxFieldLength {
                problems.append(.init(pointer: "/device/\(field.name)", detail: "\(field.name) is longer than \(Limits.maxFieldLength) characters"))
            } else if EventBatch.hasControlOrFormatCharacter(value) {
                problems.append(
                    .init(
                        pointer: "/device/\(field.name)",
                        detail:
                            "\(field.name) must not hold control or format characters (U+0000-U+001F, U+007F-U+009F, Unicode category Cf such as U+200B or U+202E)"
                    )
                )
            }
        }
        guard let rawEvents else {
            problems.append(.init(pointer: "/events", detail: "events is required"))
            throw BatchValidationError(problems)
        }
        if rawEvents.isEmpty || rawEvents.count > Limits.maxEvents {
            problems.append(.init(pointer: "/events", detail: "events must hold 1 to \(Limits.maxEvents) events"))
        }
        guard problems.isEmpty, let deviceId = device[.deviceId], let appId = device[.appId] else {
            throw BatchValidationError(problems)
        }
        var events: [DeviceEvent] = []
        events.reserveCapacity(rawEvents.count)
        var rejected: [Rejection] = []
        for (index, raw) in rawEvents.enumerated() {
            do {
                events.append(try EventFields.decodeEvent(raw, in: document))
            } catch {
                rejected.append(Rejection(index: index, detail: error.detail))
            }
        }
        return EventBatch(
            key: DeviceKey(appId: appId, deviceId: deviceId),
            info: DeviceInfo(
                containerId: device[.containerId],
                platform: device[.platform],
                osVersion: device[.osVersion],
                appVersion: device[.appVersion]
            ),
            events: events,
            rejected: rejected
        )
    }
}

/// The string fields of a body's `device`, in the order their type errors are reported.
enum DeviceField: Int, CaseIterable {
    case deviceId, appId, containerId, platform, osVersion, appVersion

    /// The field's name in the body.
    var key: StaticString {
        switch self {
        case .deviceId: "deviceId"
        case .appId: "appId"
        case .containerId: "containerId"
        case .platform: "platform"
        case .osVersion: "osVersion"
        case .appVersion: "appVersion"
        }
    }

    /// The field's name, for messages.
    var name: String { key.description }
}

/// The values of a body's `DeviceField`s.
struct DeviceFields {
    private var values = [String?](repeating: nil, count: DeviceField.allCases.count)

    subscript(_ field: DeviceField) -> String? {
        get { values[field.rawValue] }
        set { values[field.rawValue] = newValue }
    }
}

/// Why one event is invalid.
struct EventProblem: Error {
    var detail: String
}

/// Reads and checks the fields of one event.
enum EventFields {
    typealias Index = JSONDocument.Index

    static func decodeEvent(_ raw: Index, in document: JSONDocument) throws(EventProblem) -> DeviceEvent {
        guard document.kind(raw) == .object else { throw EventProblem(detail: "an event must be a JSON object") }
        let eventId = try required(raw, "eventId", string, document)
        guard !eventId.isEmpty, eventId.utf8.count <= EventBatch.Limits.maxIdLength else {
            throw EventProblem(detail: "eventId must be 1-\(EventBatch.Limits.maxIdLength) characters")
        }
        guard let occurredAt = try timestamp(raw, "occurredAt", document) else { throw EventProblem(detail: "occurredAt is required") }
        let kind = try required(raw, "kind", text, document)
        let body: DeviceEvent.Body
        if document.textEquals(kind, "activity") {
            let phase = try enumValue(raw, "phase", Phase.self, document)
            let state = try enumValue(raw, "state", ActivityState.self, document)
            let activityId = try field(raw, "activityId", string, document)
            if let activityId, activityId.utf8.count > EventBatch.Limits.maxIdLength {
                throw EventProblem(detail: "activityId must be at most \(EventBatch.Limits.maxIdLength) characters")
            }
            let startedAt = try timestamp(raw, "startedAt", document)
            let endedAt = state == .started ? nil : try timestamp(raw, "endedAt", document)
            let error = try decodeError(raw, document)
            body = .activity(.init(phase: phase, state: state, startedAt: startedAt, endedAt: endedAt, activityId: activityId, error: error))
        } else if document.textEquals(kind, "network") {
            body = .network(available: try required(raw, "available", bool, document))
        } else if document.textEquals(kind, "account") {
            body = .account(try enumValue(raw, "status", AccountStatus.self, document))
        } else if document.textEquals(kind, "pending") {
            let count = try required(raw, "pendingChanges", int, document)
            guard count >= 0 else { throw EventProblem(detail: "pendingChanges must be an integer >= 0") }
            body = .pending(count: count, oldestPendingAt: try timestamp(raw, "oldestPendingAt", document))
        } else if document.textEquals(kind, "heartbeat") {
            let summary = try field(raw, "clientSummary", string, document)
            body = .heartbeat(clientSummary: summary.flatMap(SyncStateSummary.init(rawValue:)))
        } else {
            throw EventProblem(detail: "kind must be one of activity, network, account, pending, heartbeat")
        }
        return DeviceEvent(eventId: eventId, occurredAt: occurredAt, body: body)
    }

    /// Reads a JSON value as `T`, or `nil` when it is of another type. The name is what messages call it.
    struct Reader<T>: Sendable {
        var typeName: String
        var read: @Sendable (JSONDocument, Index) -> T?
    }

    static let string = Reader<String>(typeName: "a string") { $0.string($1) }
    /// A string, left in the document (its node).
    static let text = Reader<Index>(typeName: "a string") { $0.kind($1) == .string ? $1 : nil }
    static let bool = Reader<Bool>(typeName: "a boolean") { $0.bool($1) }
    static let int = Reader<Int>(typeName: "a number") { $0.number($1)?.int }
    static let double = Reader<Double>(typeName: "a number") { $0.number($1)?.double }
    /// Most distinct members of `partialErrors` kept; the rest are counted as read but dropped.
    static let maxPartialErrors = 64

    /// An object of integers: its first `maxPartialErrors` distinct names, in body order. Linear in the members
    /// (one set look-up each): a body can hold an object of `JSONParser.maxInnerCount` members.
    static let intMap = Reader<[(String, Int)]>(typeName: "an object") { document, value in
        guard document.kind(value) == .object else { return nil }
        var out: [(String, Int)] = []
        var seen = Set<String>()
        for (name, item) in document.members(value) {
            guard let n = document.number(item)?.int else { return nil }
            // A repeated name: the first one counts, as for the other members.
            if out.count < maxPartialErrors, let name = document.string(name), seen.insert(name).inserted { out.append((name, n)) }
        }
        return out
    }

    /// A field that may be absent or null; any other type is a problem named `prefix + name`.
    static func field<T>(
        _ object: Index,
        _ name: StaticString,
        _ reader: Reader<T>,
        _ document: JSONDocument,
        prefix: String = ""
    ) throws(EventProblem) -> T? {
        guard let value = document.member(object, name), !document.isNull(value) else { return nil }
        guard let read = reader.read(document, value) else { throw EventProblem(detail: "\(prefix)\(name) must be \(reader.typeName)") }
        return read
    }

    static func required<T>(_ object: Index, _ name: StaticString, _ reader: Reader<T>, _ document: JSONDocument) throws(EventProblem) -> T {
        guard let value = try field(object, name, reader, document) else { throw EventProblem(detail: "\(name) is required") }
        return value
    }

    /// Parsed from the body's bytes: no `String` is made for it.
    static func timestamp(_ object: Index, _ name: StaticString, _ document: JSONDocument) throws(EventProblem) -> Timestamp? {
        guard let node = try field(object, name, text, document) else { return nil }
        guard let time = document.withUTF8(node, { Timestamp(rfc3339UTF8: $0) }) ?? nil else {
            throw EventProblem(detail: "\(name) must be an RFC 3339 date-time")
        }
        return time
    }

    static func enumValue<E: RawRepresentable & CaseIterable>(
        _ object: Index,
        _ name: StaticString,
        _ type: E.Type,
        _ document: JSONDocument
    ) throws(EventProblem) -> E where E.RawValue == String {
        let text = try required(object, name, string, document)
        guard let value = E(rawValue: text) else {
            throw EventProblem(detail: "\(name) must be one of " + E.allCases.map(\.rawValue).joined(separator: ", "))
        }
        return value
    }

    static func decodeError(_ event: Index, _ document: JSONDocument) throws(EventProblem) -> SyncErrorReport? {
        guard let e = document.member(event, "error"), !document.isNull(e) else { return nil }
        guard document.kind(e) == .object else { throw EventProblem(detail: "error must be an object") }
        let limit = EventBatch.Limits.maxFieldLength
        guard let domain = try field(e, "domain", string, document, prefix: "error."), !domain.isEmpty, domain.utf8.count <= limit else {
            throw EventProblem(detail: "error.domain is required (1-\(limit) characters)")
        }
        guard !EventBatch.hasControlOrFormatCharacter(domain) else {
            throw EventProblem(
                detail:
                    "error.domain must not hold control or format characters (U+0000-U+001F, U+007F-U+009F, Unicode category Cf such as U+200B or U+202E)"
            )
        }
        guard let code = try field(e, "code", int, document, prefix: "error.") else { throw EventProblem(detail: "error.code is required") }
        let message = try field(e, "message", string, document, prefix: "error.").map { String($0.prefix(EventBatch.Limits.maxMessageLength)) }
        let retryAfter = try field(e, "retryAfterSeconds", double, document, prefix: "error.")
        var partial: [Int: Int]?
        if let raw = try field(e, "partialErrors", intMap, document, prefix: "error.") {
            var items: [Int: Int] = [:]
            for (key, count) in raw {
                guard let itemCode = Int(key), count >= 0 else {
                    throw EventProblem(detail: "error.partialErrors maps error codes to counts >= 0")
                }
                items[itemCode] = count
            }
            partial = items
        }
        return SyncErrorReport(domain: domain, code: code, message: message, retryAfterSeconds: retryAfter, partialErrors: partial)
    }
}
