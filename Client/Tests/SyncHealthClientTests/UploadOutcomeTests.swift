import Foundation
import Testing

@testable import SyncHealthClient

@Suite("What each answer means for the queue")
struct UploadOutcomeTests {
    let now = Date(timeIntervalSince1970: 1_795_000_000)

    func outcome(_ status: Int, _ headers: [String: String] = [:], _ body: String = "") -> UploadOutcome {
        UploadOutcome(status: status, headers: headers, body: Data(body.utf8), now: now)
    }

    @Test("202 delivers, with the rejected events listed")
    func delivered() {
        #expect(
            outcome(202, [:], #"{"accepted":2,"duplicates":1,"rejected":[{"index":3,"detail":"bad"}]}"#)
                == .delivered(accepted: 2, duplicates: 1, rejected: [.init(index: 3, detail: "bad")])
        )
        #expect(outcome(202, [:], "<html>proxy</html>") == .retry(after: nil, reason: "unexpected 202 answer"))
    }

    @Test("429 and 503 honour Retry-After in seconds or as a date; other failures back off")
    func retry() {
        #expect(outcome(429, ["Retry-After": "7"]) == .retry(after: .seconds(7), reason: "429 Too Many Requests"))
        #expect(outcome(503, ["retry-after": "Wed, 18 Nov 2026 11:07:10 GMT"]) == .retry(after: .seconds(30), reason: "503 Service Unavailable"))
        #expect(outcome(500, [:], #"{"title":"Internal Server Error","status":500}"#) == .retry(after: nil, reason: "500 Internal Server Error"))
        #expect(outcome(429) == .retry(after: nil, reason: "429 Too Many Requests"))
    }

    @Test("401 and 403 stop, 413 splits, 400 drops")
    func others() {
        #expect(outcome(401, [:], #"{"detail":"bad key"}"#) == .refused(status: 401, detail: "bad key"))
        #expect(outcome(403) == .refused(status: 403, detail: "Forbidden"))
        #expect(outcome(413) == .tooLarge)
        #expect(outcome(400, [:], #"{"detail":"device.appId is invalid"}"#) == .invalid(detail: "device.appId is invalid"))
    }

    @Test("backoff: full jitter between the minimum and a ceiling that doubles up to the maximum; success starts over")
    func backoff() {
        var b = Backoff(minimum: .seconds(5), maximum: .seconds(900))
        var rng = SystemRandomNumberGenerator()
        var ceilings: [Double] = []
        for n in 1...12 {
            let d = b.fail(using: &rng).seconds
            let ceiling = min(900, 5 * pow(2, Double(n - 1)))
            #expect(d >= 5 && d <= ceiling + 1e-9)
            ceilings.append(ceiling)
        }
        #expect(ceilings.last == 900)
        b.succeed()
        #expect(b.fail(using: &rng) == .seconds(5))
    }
}
