import Foundation

extension SyncErrorReport {
    /// `CKErrorRetryAfterKey`.
    static let retryAfterKey = "CKRetryAfter"
    /// `CKPartialErrorsByItemIDKey`.
    static let partialErrorsKey = "CKPartialErrorsByItemIDKey"

    /// The report of an error as CloudKit and Core Data hand it over: its domain and code, CloudKit's retry delay,
    /// and for a partial failure the count of item errors per code. The message is cut to 200 characters.
    ///
    /// Core Data wraps CloudKit's errors in its own (`NSCocoaErrorDomain` 134400, 134419, ...), with the CloudKit
    /// error under `NSUnderlyingErrorKey`. The report is of that CloudKit error, so that it gets CloudKit's class;
    /// the message names the wrapper.
    public convenience init(error: any Error) {
        let outer = error as NSError
        let error = Self.cloudKitError(under: outer) ?? outer
        var partial: [Int: Int]?
        if error.domain == Self.cloudKitDomain, error.code == Self.partialFailureCode,
            let items = error.userInfo[Self.partialErrorsKey] as? [AnyHashable: any Error]
        {
            var counts: [Int: Int] = [:]
            for item in items.values { counts[(item as NSError).code, default: 0] += 1 }
            partial = counts
        }
        let retryAfter = (error.userInfo[Self.retryAfterKey] as? NSNumber)?.doubleValue
        self.init(
            domain: error.domain,
            code: error.code,
            message: String(
                Self.withoutNames(
                    error === outer ? error.localizedDescription : "\(outer.domain) \(outer.code): \(error.localizedDescription)"
                )
                .prefix(200)
            ),
            retryAfterSeconds: retryAfter,
            partialErrors: partial
        )
    }

    /// `message` without the names CloudKit puts in its per-item messages, which in an app's own zones are user
    /// data: a record, zone or share description (`<CKRecordID: 0x…; recordName=…, zoneID=…>`) becomes `<…>`, and
    /// `recordName=`, `zoneID=`, `zoneName=`, `ownerName=` and `recordID=` keep their key without their value.
    static func withoutNames(_ message: String) -> String {
        var text = message
        for (pattern, template) in namePatterns {
            text = pattern.stringByReplacingMatches(in: text, range: NSRange(text.startIndex..., in: text), withTemplate: template)
        }
        return text
    }

    private static let namePatterns: [(NSRegularExpression, String)] = [
        (#"<CK[A-Za-z]*(?:Record|Zone|Share)[A-Za-z]*[:;][^>]*>"#, "<…>"),
        (#"\b(recordName|zoneID|zoneName|ownerName|recordID)\s*=\s*(?:"[^"]*"|[^,;>)\s]*)"#, "$1=…"),
    ].compactMap { pattern, template in (try? NSRegularExpression(pattern: pattern)).map { ($0, template) } }

    /// The first CloudKit error on the chain of underlying errors below `error` (not `error` itself), if any.
    private static func cloudKitError(under error: NSError) -> NSError? {
        guard error.domain != cloudKitDomain else { return nil }
        var next = error.userInfo[NSUnderlyingErrorKey] as? NSError
        var depth = 0
        while let candidate = next, depth < 8 {
            if candidate.domain == cloudKitDomain { return candidate }
            next = candidate.userInfo[NSUnderlyingErrorKey] as? NSError
            depth += 1
        }
        return nil
    }

    /// A CloudKit partial failure made of item errors with these codes (how `CKSyncEngine` reports a send whose
    /// saves or deletes failed one by one).
    public static func partialFailure(itemCodes: [Int]) -> SyncErrorReport {
        var counts: [Int: Int] = [:]
        for code in itemCodes { counts[code, default: 0] += 1 }
        return SyncErrorReport(domain: cloudKitDomain, code: partialFailureCode, message: "\(itemCodes.count) item(s) failed", partialErrors: counts)
    }
}
