import CompressNIO
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
@_spi(Testing) import SyncHealthStore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthServer

@Suite("POST /v1/events")
struct EventsEndpointTests {
    @Test("valid events are applied and acknowledged with 202")
    func accepted() async throws {
        let service = TestService()
        try await service.test { client in
            let response = try await client.post(batch(healthyEvents))
            #expect(response.status == .accepted)
            let body = try json(response)
            #expect(body["accepted"] as? Int == 5)
            #expect(body["duplicates"] as? Int == 0)
            #expect((body["rejected"] as? [Any])?.isEmpty == true)
            let status = try json(try await client.get("/v1/devices/dev-1"))
            #expect(status["syncStateSummary"] as? String == "succeeded")
        }
    }

    @Test("an ingest key bound to an app gets 403 for another app's batch, and nothing of that batch is applied")
    func boundKey() async throws {
        let keys = KeyRing(ingest: ["notes-key@com.example.notes", "notes-key@com.example.notes.widget"], read: [readKey], admin: [])
        let service = TestService(keys: keys)
        try await service.test { client in
            #expect(try await client.post(batch(healthyEvents), key: "notes-key").status == .accepted)
            #expect(try await client.post(batch(app: "com.example.notes.widget", healthyEvents), key: "notes-key").status == .accepted)
            let other = try await client.post(batch(device: "dev-2", app: "com.example.bank", healthyEvents), key: "notes-key")
            #expect(other.status == .forbidden)
            #expect(other.headers[.contentType] == "application/problem+json")
            #expect(try json(other)["type"] as? String == "urn:synchealth:problem:app-not-allowed")
            #expect(try await client.get("/v1/devices/dev-2").status == .notFound)
        }
    }

    @Test("the directly written 202 body is byte for byte what the encoder writes")
    func directResponseMatchesEncoder() throws {
        for (accepted, duplicates) in [(0, 0), (1, 0), (0, 1), (1000, 999), (Int.max, 7)] {
            let receipt = IngestReceipt(accepted: accepted, duplicates: duplicates)
            let direct = try IngestBody.body(receipt, rejected: [])
            let encoded = try JSONResponse.encoder.encode(IngestResponseDTO(accepted: accepted, duplicates: duplicates, rejected: []))
            #expect(direct == ByteBuffer(bytes: encoded), "\(String(buffer: direct))")
        }
    }

    @Test("invalid events are listed in rejected with their index, valid ones still applied")
    func perEventRejection() async throws {
        let service = TestService()
        try await service.test { client in
            let response = try await client.post(
                batch([
                    event("a", #""kind": "network", "available": true"#),
                    event("b", #""kind": "network", "available": "yes""#),
                    event("c", #""kind": "account", "status": "maybe""#),
                ])
            )
            #expect(response.status == .accepted)
            let body = try json(response)
            #expect(body["accepted"] as? Int == 1)
            let rejected = try #require(body["rejected"] as? [[String: Any]])
            #expect(rejected.map { $0["index"] as? Int } == [1, 2])
            #expect(rejected.allSatisfy { ($0["detail"] as? String)?.isEmpty == false })
        }
    }

    @Test("a repeated eventId is counted as a duplicate and not applied again, across requests", arguments: EngineStore.withShared)
    func duplicates(store: EngineStore) async throws {
        let service = TestService(store: try await store.make())
        try await service.test { client in
            try await client.post(batch([event("x", #""kind": "network", "available": true"#)]))
            // Same id with different content: a duplicate, so the network stays true.
            let again = try json(
                try await client.post(
                    batch([
                        event("x", "2026-11-22T11:00:00Z", #""kind": "network", "available": false"#),
                        event("y", #""kind": "account", "status": "available""#),
                        event("y", #""kind": "account", "status": "noAccount""#),
                    ])
                )
            )
            #expect(again["accepted"] as? Int == 1)
            #expect(again["duplicates"] as? Int == 2)
            let status = try json(try await client.get("/v1/devices/dev-1"))
            #expect(status["isNetworkAvailable"] as? Bool == true)
            #expect(status["accountStatus"] as? String == "available")
        }
    }

    @Test(
        "the same batch posted many times at once is applied once: one answer accepts it, the others are duplicates",
        arguments: EngineStore.withShared
    )
    func concurrentRepeats(store: EngineStore) async throws {
        let service = TestService(store: try await store.make())
        try await service.test { client in
            let body = batch(healthyEvents)
            let answers = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
                for _ in 0..<24 {
                    group.addTask {
                        let answer = try json(try await client.post(body))
                        return (answer["accepted"] as? Int ?? -1, answer["duplicates"] as? Int ?? -1)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.filter { $0 == (healthyEvents.count, 0) }.count == 1)
            #expect(answers.filter { $0 == (0, healthyEvents.count) }.count == 23)
        }
    }

    @Test("an invalid envelope is 400 problem+json with pointers")
    func invalidEnvelope() async throws {
        let service = TestService()
        try await service.test { client in
            for body in [
                "not json", #"{"device": {"appId": "a"}, "events": []}"#, #"{"device": {"appId": "bad id", "deviceId": "d"}, "events": [{}]}"#,
            ] {
                let response = try await client.post(ByteBuffer(string: body))
                #expect(response.status == .badRequest)
                #expect(response.headers[.contentType] == "application/problem+json")
                let problem = try json(response)
                #expect(problem["status"] as? Int == 400)
                #expect(problem["type"] as? String == "urn:synchealth:problem:validation")
                #expect((problem["errors"] as? [[String: Any]])?.first?["pointer"] != nil)
            }
        }
    }

    @Test("a body over 1 MiB is 413")
    func tooLarge() async throws {
        let service = TestService()
        try await service.test { client in
            let padding = String(repeating: "x", count: 1 << 20)
            let response = try await client.post(ByteBuffer(string: #"{"pad": "\#(padding)"}"#))
            #expect(response.status == .contentTooLarge)
            #expect(try json(response)["status"] as? Int == 413)
        }
    }

    @Test("gzip bodies are accepted")
    func gzip() async throws {
        let service = TestService()
        try await service.test { client in
            var plain = batch(healthyEvents)
            let compressed = try plain.compress(with: .gzip())
            let response = try await client.post(compressed, headers: [.contentEncoding: "gzip"])
            #expect(response.status == .accepted)
            #expect(try json(response)["accepted"] as? Int == 5)
        }
    }

    @Test("a zip bomb gets 413 and the server keeps serving")
    func zipBomb() async throws {
        let service = TestService()
        try await service.test { client in
            var zeros = ByteBuffer(repeating: UInt8(ascii: " "), count: 64 << 20)
            let bomb = try zeros.compress(with: .gzip())
            #expect(bomb.readableBytes < 1 << 20)
            let response = try await client.post(bomb, headers: [.contentEncoding: "gzip"])
            #expect(response.status == .contentTooLarge)
            #expect(try await client.get("/livez", key: nil).status == .ok)
            #expect(try await client.post(batch(healthyEvents)).status == .accepted)
        }
    }

    @Test("corrupt gzip is 400, an unknown encoding or media type is 415, a media type in capitals is JSON")
    func badEncodings() async throws {
        let service = TestService()
        try await service.test { client in
            let corrupt = try await client.post(ByteBuffer(string: "not gzip"), headers: [.contentEncoding: "gzip"])
            #expect(corrupt.status == .badRequest)
            let brotli = try await client.post(batch(healthyEvents), headers: [.contentEncoding: "br"])
            #expect(brotli.status == .unsupportedMediaType)
            let text = try await client.post(batch(healthyEvents), headers: [.contentType: "text/plain"])
            #expect(text.status == .unsupportedMediaType)
            let short = try await client.post(batch(healthyEvents), headers: [.contentType: "application/js"])
            #expect(short.status == .unsupportedMediaType)
            // Media types compare without case, and parameters may follow.
            let upper = try await client.post(batch(healthyEvents), headers: [.contentType: "Application/JSON; charset=utf-8"])
            #expect(upper.status == .accepted)
        }
    }

    @Test("no key or an unknown key is 401; a read or admin key cannot post (403)")
    func auth() async throws {
        let service = TestService()
        try await service.test { client in
            let none = try await client.post(batch(healthyEvents), key: nil)
            #expect(none.status == .unauthorized)
            #expect(none.headers[.wwwAuthenticate] == "Bearer")
            #expect(try await client.post(batch(healthyEvents), key: "wrong").status == .unauthorized)
            #expect(try await client.post(batch(healthyEvents), key: readKey).status == .forbidden)
            #expect(try await client.post(batch(healthyEvents), key: adminKey).status == .forbidden)
        }
    }

    @Test("a device over its rate gets 429 with Retry-After and RateLimit headers, and may post again later")
    func rateLimited() async throws {
        var limits = RateLimits()
        limits.perDevice = .init(perSecond: 1, burst: 2)
        let service = TestService(limits: limits)
        try await service.test { client in
            #expect(try await client.post(batch([event("a", #""kind": "heartbeat""#)])).status == .accepted)
            #expect(try await client.post(batch([event("b", #""kind": "heartbeat""#)])).status == .accepted)
            let limited = try await client.post(batch([event("c", #""kind": "heartbeat""#)]))
            #expect(limited.status == .tooManyRequests)
            #expect(limited.headers[.retryAfter] == "1")
            #expect(limited.headers[HTTPField.Name("RateLimit-Limit")!] == "2")
            #expect(try json(limited)["status"] as? Int == 429)
            // Another device is not affected.
            #expect(try await client.post(batch(device: "other", [event("c", #""kind": "heartbeat""#)])).status == .accepted)
            service.clock.advance(by: .seconds(1))
            #expect(try await client.post(batch([event("c", #""kind": "heartbeat""#)])).status == .accepted)
        }
    }

    @Test("a key over its rate gets 429")
    func keyRateLimited() async throws {
        var limits = RateLimits()
        limits.perKey = .init(perSecond: 1, burst: 1)
        let service = TestService(limits: limits)
        try await service.test { client in
            #expect(try await client.get("/v1/summary").status == .ok)
            let limited = try await client.get("/v1/summary")
            #expect(limited.status == .tooManyRequests)
            #expect(limited.headers[.retryAfter] != nil)
            #expect(try await client.get("/v1/summary", key: adminKey).status == .ok, "another key has its own bucket")
        }
    }

    @Test("when too many requests wait for a commit, new ones are shed with 503 and Retry-After")
    func overloadSheds() async throws {
        var configuration = EngineConfiguration()
        configuration.maxQueuedRequests = 0
        let service = TestService(configuration: configuration)
        try await service.test { client in
            let shed = try await client.post(batch(healthyEvents))
            #expect(shed.status == .serviceUnavailable)
            #expect(shed.headers[.retryAfter] == "1")
            #expect(try json(shed)["type"] as? String == "urn:synchealth:problem:overloaded")
        }
    }

    @Test("when the store cannot commit, the request gets 503 and nothing of it is applied")
    func commitFailure() async throws {
        let store = InMemoryStore()
        let service = TestService(store: .local(store))
        try await service.test { client in
            store.failNextCommit(with: CancellationError())
            let failed = try await client.post(batch(healthyEvents))
            #expect(failed.status == .serviceUnavailable)
            #expect(failed.headers[.retryAfter] != nil)
            #expect(try await client.get("/v1/devices/dev-1").status == .notFound)
            // The retry is applied in full: the ids were not recorded by the failed attempt.
            let retry = try json(try await client.post(batch(healthyEvents)))
            #expect(retry["accepted"] as? Int == 5)
        }
    }
}
