import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import SyncHealthCore
import SyncHealthEngine
import SyncHealthStore

/// `GET /v1/stream`: Server-Sent Events from the engine's live feed.
///
/// - `event: alert` (with an `id:`) for every alert transition, its data the alert as `GET /v1/alerts` shows it;
/// - `event: summary`, its data `{"data": [scope summaries]}`: every scope (the largest 1,000) when the stream
///   opens, then the scopes that changed, at most once a second;
/// - `event: reset` when the `Last-Event-ID` sent cannot be resumed from (the service restarted, or the reader
///   was away for too long): reload alerts from `GET /v1/alerts`;
/// - a `: keepalive` comment every 15 s.
///
/// A reader that falls too far behind is disconnected; graceful shutdown ends every stream.
struct StreamRoutes<Engine: MonitorEngine> {
    let engine: Engine
    /// Asked while a stream lasts whether its key is still accepted.
    let keys: KeyDirectory
    /// A stream ends after this; the client reconnects (`retry:`) and is checked again.
    var maximumLife: Duration = Self.defaultMaximumLife

    static var defaultMaximumLife: Duration { .seconds(3600) }
    /// How often a stream checks its key: the key directory reads revocations every 500 ms, so a revoked or expired
    /// key's stream ends within a second of the revocation, on every replica.
    static var keyCheckInterval: Duration { .milliseconds(250) }

    func stream(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.read)
        let apps = context.allowedApps
        let channel = context.channel
        let lastEventId = HTTPField.Name.lastEventID.flatMap { request.headers[$0] }
        let subscription = engine.feed.subscribe(lastEventId: lastEventId) {
            channel.close(promise: nil)
        }
        let keyId = context.keyId ?? ""
        let keys = self.keys
        let maximumLife = self.maximumLife
        let body = ResponseBody { writer in
            try await withThrowingTaskGroup(of: Void.self) { group in
                // Ends the subscription, and so the stream, when the key stops being accepted (revoked or expired, on
                // any replica) or the stream's life is up: the client reconnects and its key is checked again.
                group.addTask {
                    let started = ContinuousClock.now
                    while !Task.isCancelled, keys.accepts(id: keyId), ContinuousClock.now - started < maximumLife {
                        try? await Task.sleep(for: Self.keyCheckInterval)
                    }
                    subscription.cancel()
                }
                try await withGracefulShutdownHandler {
                    do {
                        try await writer.write(ByteBuffer(string: "retry: 3000\n: connected\n\n"))
                        // The current summaries, read after subscribing: a change made meanwhile follows as a message.
                        if let current = try? await engine.summaries() {
                            let scopes = FleetScopeSelection.largest(current, limit: FleetRoutes<Engine>.maxScopes)
                            if let content = LiveFeed.Content.summaries(scopes).limited(to: apps) {
                                try await writer.write(ByteBuffer(bytes: try ServerSentEvents.encode(content)))
                            }
                        }
                        for await message in subscription.messages {
                            if apps == nil {
                                // Encoded once for every reader of the whole fleet.
                                try await writer.write(ByteBuffer(bytes: try message.encoded(ServerSentEvents.encode)))
                            } else if let content = message.content.limited(to: apps) {
                                try await writer.write(ByteBuffer(bytes: try ServerSentEvents.encode(content)))
                            }
                        }
                    } catch {
                        subscription.cancel()
                        throw error
                    }
                } onGracefulShutdown: {
                    subscription.cancel()
                }
                group.cancelAll()
            }
            try await writer.finish(nil)
        }
        var headers: HTTPFields = [.contentType: "text/event-stream", .cacheControl: "no-store"]
        // nginx buffers a proxied response unless told not to.
        headers.set("X-Accel-Buffering", "no")
        return Response(status: .ok, headers: headers, body: body)
    }
}

extension LiveFeed.Content {
    /// What a key limited to `apps` may see of this message: its apps' alerts and scopes, or `nil` when nothing is
    /// left to send. Everything for a global key (`nil`).
    func limited(to apps: Set<String>?) -> Self? {
        guard let apps else { return self }
        switch self {
        case .alerts(let alerts):
            let mine = alerts.filter { $0.alert.appId.map(apps.contains) ?? false }
            return mine.isEmpty ? nil : .alerts(mine)
        case .summaries(let scopes):
            let mine = scopes.filter { $0.scope.appId.map(apps.contains) ?? false }
            return mine.isEmpty ? nil : .summaries(mine)
        case .keepalive, .reset:
            return self
        }
    }
}

/// The wire form of the stream's messages.
enum ServerSentEvents {
    struct Summaries: Encodable {
        let data: [FleetSummaryDTO]
    }

    static func encode(_ content: LiveFeed.Content) throws -> [UInt8] {
        switch content {
        case .alerts(let alerts):
            var bytes: [UInt8] = []
            for (id, alert) in alerts { bytes += event("alert", id: id, data: try JSONResponse.encoder.encode(AlertJSON(alert))) }
            return bytes
        case .summaries(let scopes):
            let data = Summaries(data: scopes.map { FleetSummaryDTO(counts: $0.counts, scope: $0.scope) })
            return event("summary", id: nil, data: try JSONResponse.encoder.encode(data))
        case .keepalive:
            return Array(": keepalive\n\n".utf8)
        case .reset:
            return event("reset", id: nil, data: Data("{}".utf8))
        }
    }

    /// One event. JSON from the encoder has no raw newline, so the data is one `data:` line.
    static func event(_ name: String, id: String?, data: Data) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(data.count + 64)
        if let id { bytes += Array("id: \(id)\n".utf8) }
        bytes += Array("event: \(name)\ndata: ".utf8)
        bytes += data
        bytes += Array("\n\n".utf8)
        return bytes
    }
}

extension HTTPField.Name {
    /// `Last-Event-ID`, sent by a reader that reconnects (a valid field name: never `nil`).
    static let lastEventID = Self("Last-Event-ID")
}
