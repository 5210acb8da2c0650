import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOPosix
import SyncHealthBuildInfo
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthSQLite
import SyncHealthStore
import SyncHealthTestSupport
import SyncHealthWebhooks
import Synchronization
import Testing

@testable import SyncHealthServer

/// A real HTTP receiver on loopback: records every request and answers as told.
final class TestReceiver: Sendable {
    struct Received: Sendable {
        let id: String
        let timestamp: String
        let signature: String
        let body: [UInt8]
        var contentType = ""
        var userAgent = ""
        /// When it arrived.
        var at = ContinuousClock.now
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]) ?? [:] }
        var type: String? { json["type"] as? String }
        var alert: [String: Any] { json["data"] as? [String: Any] ?? [:] }
    }

    enum Answer: Sendable {
        case ok
        case status(Int, [String: String])
        case sleep(Duration)
    }

    let received = Mutex<[Received]>([])
    let answer = Mutex<Answer>(.ok)

    /// Runs the receiver on `port` until the task is cancelled; `onPort` gets the bound port. With 0 it takes a
    /// free port below the kernel's ephemeral range (32768 and up): live servers take theirs from that range and
    /// some tests restart one on its old port, which a receiver bound to "any port" could take in between.
    func run(port: Int = 0, onPort: @escaping @Sendable (Int) -> Void) async throws {
        guard port == 0 else { return try await serve(port: port, onPort: onPort) }
        for _ in 0..<50 {
            do {
                return try await serve(port: Int.random(in: 20_000..<32_000), onPort: onPort)
            } catch let error as IOError where error.errnoCode == EADDRINUSE {
                continue
            }
        }
        try await serve(port: 0, onPort: onPort)
    }

    private func serve(port: Int, onPort: @escaping @Sendable (Int) -> Void) async throws {
        let router = Router()
        router.post("/hook") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 1 << 20)
            self.received.withLock {
                $0.append(
                    Received(
                        id: request.headers[HTTPField.Name("webhook-id")!] ?? "",
                        timestamp: request.headers[HTTPField.Name("webhook-timestamp")!] ?? "",
                        signature: request.headers[HTTPField.Name("webhook-signature")!] ?? "",
                        body: Array(buffer: body),
                        contentType: request.headers[.contentType] ?? "",
                        userAgent: request.headers[.userAgent] ?? ""
                    )
                )
            }
            switch self.answer.withLock({ $0 }) {
            case .ok: return Response(status: .noContent)
            case .status(let code, let headers):
                var fields = HTTPFields()
                for (name, value) in headers { fields[HTTPField.Name(name)!] = value }
                return Response(status: .init(code: code), headers: fields)
            case .sleep(let d):
                try await Task.sleep(for: d)
                return Response(status: .ok)
            }
        }
        var logger = Logger(label: "receiver")
        logger.logLevel = .critical
        let app = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: port)),
            onServerRunning: { channel in onPort(channel.localAddress?.port ?? 0) },
            logger: logger
        )
        try await app.run()
    }

    var count: Int { received.withLock { $0.count } }
    var all: [Received] { received.withLock { $0 } }
}

/// Runs a receiver for the duration of `body`.
func withReceiver<T: Sendable>(_ receiver: TestReceiver, port: Int = 0, _ body: @escaping @Sendable (Int) async throws -> T) async throws -> T {
    let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
    return try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask {
            try await receiver.run(port: port) { continuation.yield($0) }
            return nil
        }
        var iterator = stream.makeAsyncIterator()
        guard let bound = await iterator.next() else { throw NotReady() }
        let result = try await body(bound)
        group.cancelAll()
        return result
    }
}

func createWebhook(_ client: any TestClientProtocol, url: String, kinds: [String] = []) async throws -> [String: Any] {
    let kindList = kinds.map { "\"\($0)\"" }.joined(separator: ",")
    let response = try await client.execute(
        uri: "/v1/webhooks",
        method: .post,
        headers: headers(adminKey),
        body: ByteBuffer(string: #"{"url": "\#(url)", "kinds": [\#(kindList)], "description": "test"}"#)
    )
    #expect(response.status == .created)
    return try json(response)
}

func deliveryLog(_ client: any TestClientProtocol, _ id: String) async throws -> [[String: Any]] {
    try json(try await client.get("/v1/webhooks/\(id)/deliveries", key: adminKey))["data"] as? [[String: Any]] ?? []
}

@Suite("Webhooks", .serialized)
struct WebhookTests {
    @Test("subscriptions: created with a secret shown once, listed, fetched, deleted; admin key only")
    func management() async throws {
        let service = TestService(
            webhooks: {
                var c = DeliveryConfiguration()
                c.allowPrivate = true
                return c
            }()
        )
        try await service.test { client in
            let created = try await createWebhook(client, url: "http://127.0.0.1:9/hook", kinds: ["syncError"])
            let id = try #require(created["id"] as? String)
            #expect((created["secret"] as? String)?.hasPrefix("whsec_") == true)
            #expect(created["kinds"] as? [String] == ["syncError"])
            let fetched = try json(try await client.get("/v1/webhooks/\(id)", key: adminKey))
            #expect(fetched["url"] as? String == "http://127.0.0.1:9/hook")
            #expect(fetched["secret"] == nil, "the secret is never returned after creation")
            let list = try json(try await client.get("/v1/webhooks", key: adminKey))
            #expect((list["data"] as? [[String: Any]])?.count == 1)
            #expect((list["data"] as? [[String: Any]])?.first?["secret"] == nil)
            for key in [readKey, ingestKey] {
                #expect(try await client.get("/v1/webhooks", key: key).status == .forbidden)
                let post = try await client.execute(uri: "/v1/webhooks", method: .post, headers: headers(key), body: ByteBuffer(string: "{}"))
                #expect(post.status == .forbidden)
            }
            #expect(try await client.get("/v1/webhooks", key: nil).status == .unauthorized)
            #expect(try await client.execute(uri: "/v1/webhooks/\(id)", method: .delete, headers: headers(adminKey)).status == .noContent)
            #expect(try await client.get("/v1/webhooks/\(id)", key: adminKey).status == .notFound)
            #expect(try await client.execute(uri: "/v1/webhooks/\(id)", method: .delete, headers: headers(adminKey)).status == .notFound)
        }
    }

    @Test("bad subscriptions are 400: not http(s), private targets without the flag, unknown kinds")
    func validation() async throws {
        let service = TestService()
        try await service.test { client in
            for (url, kinds) in [
                ("ftp://example.com/x", ""), ("http://127.0.0.1:8080/hook", ""), ("http://169.254.169.254/latest", ""),
                ("http://10.1.2.3/x", ""), ("http://[::1]/x", ""), ("http://localhost/x", ""), ("http://127.0.0.1/x", #""nope""#),
            ] {
                let response = try await client.execute(
                    uri: "/v1/webhooks",
                    method: .post,
                    headers: headers(adminKey),
                    body: ByteBuffer(string: #"{"url": "\#(url)", "kinds": [\#(kinds)]}"#)
                )
                #expect(response.status == .badRequest, "\(url)")
            }
            let missing = try await client.execute(uri: "/v1/webhooks", method: .post, headers: headers(adminKey), body: ByteBuffer(string: "{}"))
            #expect(missing.status == .badRequest)
        }
    }

    @Test("receivers that hang do not hold up another's delivery: sends have threads of their own, as many as go at once")
    func hangingReceivers() async throws {
        let slow = TestReceiver()
        slow.answer.withLock { $0 = .sleep(.seconds(5)) }
        let fast = TestReceiver()
        var webhookConfiguration = DeliveryConfiguration()
        webhookConfiguration.allowPrivate = true
        #expect(CurlTransport.sendingThreads >= webhookConfiguration.concurrency, "a thread for every send in flight")
        // A pool like the service's, for this test alone: the service's is shared by every test in the process.
        let pool = NIOThreadPool(numberOfThreads: CurlTransport.sendingThreads)
        pool.start()
        let service = TestService(transport: CurlTransport(threadPool: pool), webhooks: webhookConfiguration)
        try await withReceiver(slow) { slowPort in
            try await withReceiver(fast) { fastPort in
                try await service.test { client in
                    // On NIO's shared pool (a thread a core) the fast delivery waited behind the hanging ones.
                    for _ in 0..<5 { _ = try await createWebhook(client, url: "http://127.0.0.1:\(slowPort)/hook") }
                    _ = try await createWebhook(client, url: "http://127.0.0.1:\(fastPort)/hook")
                    let started = ContinuousClock.now
                    try await client.post(
                        batch([event("n", #""kind": "network", "available": true"#), event("f", "2026-11-22T10:00:01Z", urgentError)])
                    )
                    #expect(try await eventually { fast.count == 1 })
                    // Behind a hanging send it would wait the 5 s; under a loaded machine a free send took up to 3.1 s.
                    #expect(ContinuousClock.now - started < .seconds(4), "the fast receiver waited \(ContinuousClock.now - started)")
                    #expect(try await eventually { slow.count == 5 })
                }
            }
        }
        try await pool.shutdownGracefully()
    }

    @Test("end to end with libcurl: a device breaks, one signed alert.firing arrives; it recovers, one alert.resolved")
    func endToEnd() async throws {
        let receiver = TestReceiver()
        var webhookConfiguration = DeliveryConfiguration()
        webhookConfiguration.allowPrivate = true
        let service = TestService(transport: CurlTransport(), webhooks: webhookConfiguration)
        try await withReceiver(receiver) { port in
            try await service.test { client in
                let created = try await createWebhook(client, url: "http://127.0.0.1:\(port)/hook")
                let secret = try #require(created["secret"] as? String)
                try await client.post(batch([event("n", #""kind": "network", "available": true"#), event("f", "2026-11-22T10:00:01Z", urgentError)]))
                #expect(try await eventually { receiver.count == 1 })
                try await service.drained()
                #expect(receiver.count == 1, "exactly one alert.firing")
                let firing = try #require(receiver.all.first)
                #expect(firing.type == "alert.firing")
                #expect(firing.alert["kind"] as? String == "syncError")
                #expect(firing.alert["deviceId"] as? String == "dev-1")
                #expect(firing.userAgent == "SyncHealth/\(BuildInfo.version)", "the sender and its release")
                let signer = try #require(WebhookSigner(secret: secret))
                #expect(signer.verify(id: firing.id, timestamp: Int64(firing.timestamp) ?? 0, body: firing.body, signatureHeader: firing.signature))
                #expect(
                    !signer.verify(id: firing.id, timestamp: (Int64(firing.timestamp) ?? 0) + 1, body: firing.body, signatureHeader: firing.signature)
                )

                try await client.post(batch([event("s", "2026-11-22T10:00:05Z", #""kind": "activity", "phase": "export", "state": "started""#)]))
                #expect(try await eventually { receiver.count == 2 })
                try await service.drained()
                #expect(receiver.count == 2, "exactly one alert.resolved")
                let resolved = receiver.all[1]
                #expect(resolved.type == "alert.resolved")
                #expect(resolved.alert["id"] as? String == firing.alert["id"] as? String)
                #expect(resolved.id != firing.id)
                let log = try await deliveryLog(client, try #require(created["id"] as? String))
                #expect(log.count == 2 && log.allSatisfy { $0["outcome"] as? String == "delivered" && $0["statusCode"] as? Int == 204 })
            }
        }
    }

    @Test("a receiver that refuses connections for a while gets every message, in order, with stable ids, across a restart")
    func outageAndRestart() async throws {
        let dir = temporaryDirectory()
        var webhookConfiguration = DeliveryConfiguration()
        webhookConfiguration.allowPrivate = true
        webhookConfiguration.retrySchedule = [.zero] + Array(repeating: .milliseconds(100), count: 60)
        // Find a free port, then leave it closed: connections are refused.
        let probe = TestReceiver()
        let port = try await withReceiver(probe) { $0 }
        let first = TestService(
            store: .local(try SQLiteStore(directory: dir, synchronous: .normal)),
            transport: CurlTransport(),
            webhooks: webhookConfiguration,
            realTime: true
        )
        let hook = Mutex("")
        try await first.test { client in
            let created = try await createWebhook(client, url: "http://127.0.0.1:\(port)/hook")
            hook.withLock { $0 = created["id"] as? String ?? "" }
            // Three devices break and recover: six messages, two per device, in fire-then-resolve order.
            for d in 0..<3 {
                try await client.post(
                    batch(device: "d\(d)", [event("n", #""kind": "network", "available": true"#), event("f", "2026-11-22T10:00:01Z", urgentError)])
                )
                try await client.post(
                    batch(device: "d\(d)", [event("s", "2026-11-22T10:00:05Z", #""kind": "activity", "phase": "export", "state": "started""#)])
                )
            }
            // Some attempts fail before the restart.
            #expect(try await eventually { try await deliveryLog(client, hook.withLock { $0 }).count >= 6 })
        }
        // Restarted while the receiver is still down; then the receiver comes back on the same port.
        let receiver = TestReceiver()
        let second = TestService(
            store: .local(try SQLiteStore(directory: dir, synchronous: .normal)),
            transport: CurlTransport(),
            webhooks: webhookConfiguration,
            realTime: true
        )
        try await second.test { client in
            let before = try await deliveryLog(client, hook.withLock { $0 }).count
            #expect(
                try await eventually { try await deliveryLog(client, hook.withLock { $0 }).count > before },
                "attempts fail after the restart too"
            )
            try await withReceiver(receiver, port: port) { _ in
                #expect(try await eventually { receiver.count >= 6 })
                // Nothing is left to send once the outbox is empty: a duplicate would have arrived by then.
                try await second.drained()
            }
            let got = receiver.all
            let ids = Set(got.map(\.id))
            #expect(ids.count == 6, "every message arrived; \(got.count) requests for \(ids.count) ids")
            for d in 0..<3 {
                let mine = got.filter { $0.alert["deviceId"] as? String == "d\(d)" }
                #expect(mine.first?.type == "alert.firing", "d\(d): the fire comes first")
                #expect(mine.last?.type == "alert.resolved")
            }
            // Any duplicate delivery of a message carries the same webhook-id: the ids are the message ids.
            let hooks = try json(try await client.get("/v1/webhooks", key: adminKey))["data"] as? [[String: Any]] ?? []
            let log = try await deliveryLog(client, try #require(hooks.first?["id"] as? String))
            #expect(log.contains { $0["outcome"] as? String == "retrying" && ($0["error"] as? String)?.isEmpty == false })
            #expect(Set(log.compactMap { $0["messageId"] as? String }) == ids)
        }
    }

    @Test("receiver answers are handled and logged: 500 retries, 429 honours Retry-After, 410 disables, timeouts and 3xx retry")
    func receiverAnswers() async throws {
        let receiver = TestReceiver()
        var webhookConfiguration = DeliveryConfiguration()
        webhookConfiguration.allowPrivate = true
        webhookConfiguration.jitter = 0
        webhookConfiguration.retrySchedule = [.zero, .seconds(30), .seconds(30)]
        let clock = ManualClock(testStart)
        // The receiver runs in the test process: under the whole suite's load an answer can take most of a second,
        // so the timeout leaves room, and the receiver that must time out sleeps well past it.
        let service = TestService(clock: clock, transport: CurlTransport(totalTimeout: .seconds(2)), webhooks: webhookConfiguration)
        try await withReceiver(receiver) { port in
            try await service.test { client in
                let hook = try #require(try await createWebhook(client, url: "http://127.0.0.1:\(port)/hook")["id"] as? String)
                func breakDevice(_ name: String) async throws {
                    try await client.post(
                        batch(device: name, [event("n", #""kind": "network", "available": true"#), event("f", "2026-11-22T10:00:01Z", urgentError)])
                    )
                }
                func lastAttempt() async throws -> [String: Any] { try await deliveryLog(client, hook).first ?? [:] }

                receiver.answer.withLock { $0 = .status(500, [:]) }
                try await breakDevice("a")
                #expect(try await eventually { try await lastAttempt()["statusCode"] as? Int == 500 })
                var attempt = try await lastAttempt()
                #expect(attempt["outcome"] as? String == "retrying")
                #expect(attempt["nextRetryAt"] as? String == (testStart + .seconds(30)).rfc3339)

                receiver.answer.withLock { $0 = .status(429, ["Retry-After": "120"]) }
                clock.advance(by: .seconds(30))
                #expect(try await eventually { try await lastAttempt()["statusCode"] as? Int == 429 })
                attempt = try await lastAttempt()
                #expect(attempt["nextRetryAt"] as? String == (testStart + .seconds(150)).rfc3339, "Retry-After wins over the 30 s schedule")

                receiver.answer.withLock { $0 = .status(302, ["Location": "http://127.0.0.1:1/elsewhere"]) }
                clock.advance(by: .seconds(120))
                #expect(try await eventually { try await lastAttempt()["statusCode"] as? Int == 302 })
                attempt = try await lastAttempt()
                #expect(attempt["outcome"] as? String == "failed", "schedule exhausted: kept as failed")
                #expect((attempt["error"] as? String)?.contains("redirect") == true)
                let failedId = try #require(attempt["messageId"] as? String)

                // A failed message can be sent again.
                receiver.answer.withLock { $0 = .sleep(.seconds(5)) }
                let resend = try await client.execute(
                    uri: "/v1/webhooks/\(hook)/deliveries/\(failedId)/resend",
                    method: .post,
                    headers: headers(adminKey)
                )
                #expect(resend.status == .accepted)
                #expect(
                    try await eventually {
                        let last = try await lastAttempt()
                        return last["attempt"] as? Int == 1 && last["error"] as? String != nil
                    }
                )
                attempt = try await lastAttempt()
                #expect(attempt["statusCode"] is NSNull, "no answer within the timeout")
                #expect(attempt["outcome"] as? String == "retrying")

                receiver.answer.withLock { $0 = .status(410, [:]) }
                clock.advance(by: .seconds(30))
                #expect(try await eventually { try await lastAttempt()["statusCode"] as? Int == 410 })
                #expect(try await lastAttempt()["outcome"] as? String == "disabled")
                let subscription = try json(try await client.get("/v1/webhooks/\(hook)", key: adminKey))
                #expect(subscription["disabled"] as? Bool == true)
            }
        }
    }
}
