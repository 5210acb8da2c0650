/// What to do about an error, and who must do it.
///
/// The sentences restate Apple's documentation of `CKError.Code` and of Core Data's error codes; `who` follows the
/// error's class: transient and app-recoverable errors need nobody (the sync engine retries or merges), user-action
/// errors need the user, developer and data-loss errors need the app's developer.
public struct ErrorAdvice: Hashable, Sendable {
    /// Who must act.
    public enum Who: String, CaseIterable, Sendable, Codable {
        /// The app's developer: a build, an entitlement, the CloudKit schema or the app's code.
        case developer
        /// The device's user: their iCloud account, storage or settings.
        case user
        /// Nobody: CloudKit or the sync engine recovers on its own.
        case none
    }

    /// Who must act.
    public let who: Who
    /// One sentence on what to do.
    public let text: String

    /// Advice.
    public init(who: Who, text: String) {
        self.who = who
        self.text = text
    }
}

extension SyncErrorReport {
    /// `NSCocoaErrorDomain`, where Core Data reports its errors.
    public static let cocoaDomain = "NSCocoaErrorDomain"

    /// What to do about this error; `nil` for domains and codes the service does not know. A partial failure takes
    /// the advice of its worst per-item code.
    public var advice: ErrorAdvice? {
        switch domain {
        case Self.cloudKitDomain:
            if code == Self.partialFailureCode, let worst = worstPartialCode, let advice = ErrorAdvice.cloudKit[worst] {
                return advice
            }
            return ErrorAdvice.cloudKit[code]
        case Self.cocoaDomain:
            return ErrorAdvice.coreData[code]
        default:
            return nil
        }
    }

    /// The per-item code of the worst class (the lowest code among equals, so that the choice is stable).
    var worstPartialCode: Int? {
        (partialErrors ?? [:]).filter { $0.value > 0 }.keys.max { a, b in
            let (ca, cb) = (ErrorClass.forCloudKitCode(a) ?? .unknown, ErrorClass.forCloudKitCode(b) ?? .unknown)
            return ca == cb ? a > b : ca < cb
        }
    }
}
