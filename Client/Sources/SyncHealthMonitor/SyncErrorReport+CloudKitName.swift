extension SyncErrorReport {
    /// The `CKError.Code` names, by raw value.
    static let cloudKitNames: [Int: String] = [
        1: "internalError", 2: "partialFailure", 3: "networkUnavailable", 4: "networkFailure", 5: "badContainer",
        6: "serviceUnavailable", 7: "requestRateLimited", 8: "missingEntitlement", 9: "notAuthenticated",
        10: "permissionFailure", 11: "unknownItem", 12: "invalidArguments", 13: "resultsTruncated",
        14: "serverRecordChanged", 15: "serverRejectedRequest", 16: "assetFileNotFound", 17: "assetFileModified",
        18: "incompatibleVersion", 19: "constraintViolation", 20: "operationCancelled", 21: "changeTokenExpired",
        22: "batchRequestFailed", 23: "zoneBusy", 24: "badDatabase", 25: "quotaExceeded", 26: "zoneNotFound",
        27: "limitExceeded", 28: "userDeletedZone", 29: "tooManyParticipants", 30: "alreadyShared",
        31: "referenceViolation", 32: "managedAccountRestricted", 33: "participantMayNeedVerification",
        34: "serverResponseLost", 35: "assetNotAvailable", 36: "accountTemporarilyUnavailable",
    ]

    /// The `CKError.Code` name of a CloudKit error (`quotaExceeded` for code 25); `nil` for other domains and
    /// unknown codes.
    public var cloudKitName: String? {
        domain == Self.cloudKitDomain ? Self.cloudKitNames[code] : nil
    }

    /// `domain code`, with the CloudKit name when there is one: `CKErrorDomain 25 (quotaExceeded)`.
    public var displayName: String {
        cloudKitName.map { "\(domain) \(code) (\($0))" } ?? "\(domain) \(code)"
    }
}
