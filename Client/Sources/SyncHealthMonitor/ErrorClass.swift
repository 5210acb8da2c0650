/// How much an error matters to ops (monitor-semantics.md, part 2).
///
/// Cases are declared from least to most severe, so `max()` picks the worst.
public enum ErrorClass: String, CaseIterable, Sendable, Comparable, Codable {
    case unknown
    case transient
    case appRecoverable
    case userAction
    case dataLoss
    case developer

    /// Severity used to pick the worst class; higher is worse.
    var severity: Int {
        switch self {
        case .transient: 0
        case .unknown: 1
        case .appRecoverable: 2
        case .userAction: 3
        case .dataLoss: 4
        case .developer: 5
        }
    }

    public static func < (lhs: ErrorClass, rhs: ErrorClass) -> Bool { lhs.severity < rhs.severity }

    /// Whether a `syncError` alert of this class fires without delay.
    public var isUrgent: Bool { self == .developer || self == .dataLoss }

    /// The class of a `CKErrorDomain` code; `nil` for codes the table does not list.
    public static func forCloudKitCode(_ code: Int) -> ErrorClass? {
        switch code {
        case 3, 4, 6, 7, 20, 23, 34, 36: .transient
        case 9, 10, 25, 32, 33: .userAction
        case 11, 14, 16, 17, 21, 22, 27: .appRecoverable
        case 5, 8, 12, 15, 18, 19, 24, 31: .developer
        case 26, 28: .dataLoss
        default: nil
        }
    }

    /// Classifies an error by domain and code; a CloudKit partial failure (code 2) takes the worst class of its
    /// per-item codes when the device reported them.
    public static func classify(domain: String, code: Int, partialErrors: [Int: Int]?) -> ErrorClass {
        guard domain == SyncErrorReport.cloudKitDomain else { return .unknown }
        if code == SyncErrorReport.partialFailureCode {
            let classes = (partialErrors ?? [:]).compactMap { itemCode, count in
                count > 0 ? (forCloudKitCode(itemCode) ?? .unknown) : nil
            }
            return classes.max() ?? .unknown
        }
        return forCloudKitCode(code) ?? .unknown
    }
}
