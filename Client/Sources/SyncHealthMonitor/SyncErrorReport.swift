/// An error a device reported with a failed activity.
///
/// Immutable and shared by reference so that a device's monitor state stays small.
public final class SyncErrorReport: Sendable, Hashable, CustomStringConvertible {
    /// The error domain of CloudKit's errors.
    public static let cloudKitDomain = "CKErrorDomain"
    /// `CKError.partialFailure`.
    public static let partialFailureCode = 2

    /// The error's domain, e.g. `CKErrorDomain`.
    public let domain: String
    /// The error's code within its domain.
    public let code: Int
    /// A human-readable message, if the device sent one.
    public let message: String?
    /// CloudKit's suggested retry delay, if any.
    public let retryAfterSeconds: Double?
    /// Per-item error codes and how many items failed with each, for partial failures.
    public let partialErrors: [Int: Int]?
    /// The class computed from domain, code and per-item codes.
    public let errorClass: ErrorClass

    /// Creates a report and classifies it.
    public init(domain: String, code: Int, message: String? = nil, retryAfterSeconds: Double? = nil, partialErrors: [Int: Int]? = nil) {
        self.domain = domain
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
        self.partialErrors = partialErrors
        self.errorClass = ErrorClass.classify(domain: domain, code: code, partialErrors: partialErrors)
    }

    public static func == (lhs: SyncErrorReport, rhs: SyncErrorReport) -> Bool {
        lhs === rhs
            || (lhs.domain == rhs.domain && lhs.code == rhs.code && lhs.message == rhs.message
                && lhs.retryAfterSeconds == rhs.retryAfterSeconds && lhs.partialErrors == rhs.partialErrors)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(domain)
        hasher.combine(code)
        hasher.combine(message)
    }

    public var description: String { "\(domain) \(code)" }
}
