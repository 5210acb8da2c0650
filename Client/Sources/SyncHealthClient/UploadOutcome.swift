import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the server's answer to one batch means for the queue. Pure, so that every status is tested alone.
enum UploadOutcome: Equatable {
    /// `202`: the batch is delivered; the events the server rejected (`index`, `detail`) are dropped for good.
    case delivered(accepted: Int, duplicates: Int, rejected: [Rejection])
    /// `413`: the batch is too large; send it in halves (one event alone that is too large is dropped).
    case tooLarge
    /// An App Attest problem (`assertion-…`, `attestation-…`, `token-…`, whatever the status): the key is attested
    /// anew, the token refreshed or the upload signed anew, after a backoff; the batch stays queued and sending goes on.
    case attestationProblem(type: String, detail: String)
    /// `401`/`403`: the key is wrong or may not post for this app; stop until reconfigured.
    case refused(status: Int, detail: String)
    /// `400`: the envelope is invalid (a bad app or device id); retrying the same batch cannot succeed.
    case invalid(detail: String)
    /// `429`/`503` with the server's delay, another failure with none: keep the batch and try again later.
    case retry(after: Duration?, reason: String)

    struct Rejection: Equatable, Decodable {
        var index: Int
        var detail: String
    }

    /// Reads an HTTP answer.
    init(status: Int, headers: [String: String], body: Data, now: Date) {
        let detail = Self.detail(body) ?? HTTPURLResponse.localizedString(forStatusCode: status)
        switch status {
        case 200, 202:
            struct Receipt: Decodable {
                var accepted: Int
                var duplicates: Int
                var rejected: [Rejection]?
            }
            if let receipt = try? JSONDecoder().decode(Receipt.self, from: body) {
                self = .delivered(accepted: receipt.accepted, duplicates: receipt.duplicates, rejected: receipt.rejected ?? [])
            } else {
                // A proxy answering 2xx with something else has not shown that the server stored the events.
                self = .retry(after: nil, reason: "unexpected \(status) answer")
            }
        case 400..<500 where Self.isAttestationProblem(Self.problemType(body)):
            self = .attestationProblem(type: Self.problemType(body) ?? "", detail: detail)
        case 413: self = .tooLarge
        case 401, 403: self = .refused(status: status, detail: detail)
        case 400: self = .invalid(detail: detail)
        case 429, 503: self = .retry(after: Self.retryAfter(headers, now: now), reason: "\(status) \(detail)")
        default: self = .retry(after: nil, reason: "\(status) \(detail)")
        }
    }

    /// The longest wait read from a `Retry-After` (a day). The delivery loop holds any wait to the configuration's
    /// `maximumRetryDelay` too; this bound keeps the conversion itself safe (`Duration.seconds(1e300)` traps).
    static let longestRetryAfter: Double = 86_400

    /// `Retry-After` in seconds or as an HTTP date, at most `longestRetryAfter`; `nil` for a value that is neither,
    /// negative, NaN or infinite (a captive portal, proxy or CDN can send anything).
    static func retryAfter(_ headers: [String: String], now: Date) -> Duration? {
        guard let value = headers.first(where: { $0.key.lowercased() == "retry-after" })?.value.trimmingCharacters(in: .whitespaces) else {
            return nil
        }
        if let seconds = Double(value) {
            guard seconds.isFinite, seconds >= 0 else { return nil }
            return .seconds(min(seconds, longestRetryAfter))
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: value) else { return nil }
        let seconds = date.timeIntervalSince(now)
        guard seconds.isFinite else { return nil }
        return .seconds(min(max(0, seconds), longestRetryAfter))
    }

    /// Whether a problem type is App Attest's: the device's to fix by attesting or signing again, never a reason to
    /// drop a batch or stop sending.
    static func isAttestationProblem(_ type: String?) -> Bool {
        guard let type else { return false }
        return ["assertion-", "attestation-", "token-"].contains { type.hasPrefix("urn:synchealth:problem:" + $0) }
    }

    /// The `type` of a problem+json body.
    static func problemType(_ body: Data) -> String? {
        struct Problem: Decodable { var type: String? }
        return (try? JSONDecoder().decode(Problem.self, from: body))?.type
    }

    /// The `detail` of a problem+json body.
    private static func detail(_ body: Data) -> String? {
        struct Problem: Decodable {
            var detail: String?
            var title: String?
        }
        guard let problem = try? JSONDecoder().decode(Problem.self, from: body) else { return nil }
        return problem.detail ?? problem.title
    }
}
