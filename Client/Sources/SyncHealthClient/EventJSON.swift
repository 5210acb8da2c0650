/// The API contract's JSON for events and the batch envelope, written by hand: a few fixed shapes, and no
/// Foundation encoder on the path of every recorded event.
enum EventJSON {
    /// One event, as it goes into `events`.
    static func encode(_ event: DeviceEvent) -> String {
        var w = ObjectWriter()
        w.string("eventId", event.eventId)
        w.string("occurredAt", event.occurredAt.rfc3339)
        switch event.body {
        case .activity(let a):
            w.string("kind", "activity")
            w.string("phase", a.phase.rawValue)
            w.string("state", a.state.rawValue)
            if let v = a.startedAt { w.string("startedAt", v.rfc3339) }
            if let v = a.endedAt { w.string("endedAt", v.rfc3339) }
            if let v = a.activityId { w.string("activityId", v) }
            if let e = a.error { w.raw("error", encode(e)) }
        case .network(let available):
            w.string("kind", "network")
            w.raw("available", available ? "true" : "false")
        case .account(let status):
            w.string("kind", "account")
            w.string("status", status.rawValue)
        case .pending(let count, let oldest):
            w.string("kind", "pending")
            w.raw("pendingChanges", String(count))
            if let v = oldest { w.string("oldestPendingAt", v.rfc3339) }
        case .heartbeat(let summary):
            w.string("kind", "heartbeat")
            if let summary { w.string("clientSummary", summary.rawValue) }
        }
        return w.finish()
    }

    /// An error object.
    static func encode(_ error: SyncErrorReport) -> String {
        var w = ObjectWriter()
        w.string("domain", error.domain)
        w.raw("code", String(error.code))
        if let v = error.message { w.string("message", v) }
        if let v = error.retryAfterSeconds, v.isFinite, v >= 0 { w.raw("retryAfterSeconds", String(v)) }
        if let partial = error.partialErrors, !partial.isEmpty {
            var p = ObjectWriter()
            for (code, count) in partial.sorted(by: { $0.key < $1.key }) { p.raw(String(code), String(count)) }
            w.raw("partialErrors", p.finish())
        }
        return w.finish()
    }

    /// The request body: the device and the events, each already encoded.
    static func batch(device: DeviceDescription, events: some Sequence<String>) -> String {
        var d = ObjectWriter()
        d.string("deviceId", device.deviceId)
        d.string("appId", device.appId)
        if let v = device.containerId { d.string("containerId", v) }
        if let v = device.platform { d.string("platform", v) }
        if let v = device.osVersion { d.string("osVersion", v) }
        if let v = device.appVersion { d.string("appVersion", v) }
        return #"{"device":"# + d.finish() + #","events":["# + events.joined(separator: ",") + "]}"
    }

    /// `value` as a JSON string literal.
    static func quoted(_ value: String) -> String {
        var out = "\""
        out.reserveCapacity(value.utf8.count + 2)
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// Writes one JSON object, member by member.
    struct ObjectWriter {
        private var text = "{"

        mutating func string(_ name: String, _ value: String) { raw(name, EventJSON.quoted(value)) }

        mutating func raw(_ name: String, _ json: String) {
            if text.count > 1 { text += "," }
            text += EventJSON.quoted(name) + ":" + json
        }

        func finish() -> String { text + "}" }
    }
}

/// The `device` object of a batch.
struct DeviceDescription: Sendable, Equatable {
    var deviceId: String
    var appId: String
    var containerId: String?
    var platform: String?
    var osVersion: String?
    var appVersion: String?
}
