import Foundation

extension SyncErrorReport {
    /// `CKErrorRetryAfterKey`.
    static let retryAfterKey = "CKRetryAfter"
    /// `CKPartialErrorsByItemIDKey`.
    static let partialErrorsKey = "CKPartialErrorsByItemIDKey"

    /// The report of an error as CloudKit and Core Data hand it over: its domain and code, CloudKit's retry delay,
    /// and for a partial failure the count of item errors per code. The message is cut to 200 characters.
    public convenience init(error: any Error) {
        let error = error as NSError
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
            message: String(error.localizedDescription.prefix(200)),
            retryAfterSeconds: retryAfter,
            partialErrors: partial
        )
    }

    /// A CloudKit partial failure made of item errors with these codes (how `CKSyncEngine` reports a send whose
    /// saves or deletes failed one by one).
    public static func partialFailure(itemCodes: [Int]) -> SyncErrorReport {
        var counts: [Int: Int] = [:]
        for code in itemCodes { counts[code, default: 0] += 1 }
        return SyncErrorReport(domain: cloudKitDomain, code: partialFailureCode, message: "\(itemCodes.count) item(s) failed", partialErrors: counts)
    }
}
