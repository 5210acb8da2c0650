import Foundation
public import NIOCore
public import SyncHealthCore

// Request bodies and times that the engine and server tests share.

/// Where every test's clock starts.
public let testStart = Timestamp(rfc3339: "2026-11-22T10:00:00Z") ?? Timestamp(microseconds: 0)

/// A JSON event body.
public func event(_ id: String, _ at: String, _ fields: String) -> String {
    #"{"eventId": "\#(id)", "occurredAt": "\#(at)", \#(fields)}"#
}

/// A JSON event body at the test's start time.
public func event(_ id: String, _ fields: String) -> String {
    event(id, "2026-11-22T10:00:00Z", fields)
}

public func batch(
    device: String = "dev-1",
    app: String = "com.example.notes",
    container: String? = "iCloud.com.example.notes",
    _ events: [String]
) -> ByteBuffer {
    let containerField = container.map { #", "containerId": "\#($0)""# } ?? ""
    return ByteBuffer(
        string:
            #"{"device": {"deviceId": "\#(device)", "appId": "\#(app)"\#(containerField), "platform": "iOS"}, "events": [\#(events.joined(separator: ","))]}"#
    )
}

public let healthyEvents = [
    event("h1", #""kind": "account", "status": "available""#),
    event("h2", #""kind": "network", "available": true"#),
    event("h3", "2026-11-22T10:00:01Z", #""kind": "activity", "phase": "setup", "state": "succeeded""#),
    event("h4", "2026-11-22T10:00:02Z", #""kind": "activity", "phase": "import", "state": "succeeded""#),
    event("h5", "2026-11-22T10:00:03Z", #""kind": "activity", "phase": "export", "state": "succeeded""#),
]

public let notSyncingEvents = [
    event("n1", #""kind": "account", "status": "available""#),
    event("n2", #""kind": "network", "available": true"#),
    event("n3", "2026-11-22T10:00:01Z", #""kind": "activity", "phase": "setup", "state": "succeeded""#),
]

/// An export that fails with an error that alerts at once (`CKError.badContainer`).
public let urgentError = #""kind": "activity", "phase": "export", "state": "failed", "error": {"domain": "CKErrorDomain", "code": 5}"#

/// A fresh directory under the system's temporary directory.
public func temporaryDirectory() -> String {
    let dir = NSTemporaryDirectory() + "synchealth-test-" + UUID().uuidString
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}
