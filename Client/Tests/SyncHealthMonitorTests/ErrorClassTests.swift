import SyncHealthMonitorTestKit
import Testing

@testable import SyncHealthMonitor

@Suite("Part 2: error classes")
struct ErrorClassTests {
    static let table: [(ErrorClass, [Int])] = [
        (.transient, [3, 4, 6, 7, 20, 23, 34, 36]),
        (.userAction, [9, 25, 32, 33, 10]),
        (.appRecoverable, [11, 14, 16, 17, 21, 22, 27]),
        (.developer, [5, 8, 12, 15, 18, 19, 24, 31]),
        (.dataLoss, [26, 28]),
    ]

    @Test("every CKError code of the table gets its class")
    func table() {
        for (cls, codes) in Self.table {
            for code in codes {
                #expect(SyncErrorReport(domain: "CKErrorDomain", code: code).errorClass == cls, "code \(code)")
            }
        }
    }

    @Test("unlisted codes and other domains are unknown")
    func unknown() {
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 1).errorClass == .unknown)
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 999).errorClass == .unknown)
        #expect(SyncErrorReport(domain: "NSCocoaErrorDomain", code: 4).errorClass == .unknown)
    }

    @Test("a partial failure takes the worst class of its per-item codes")
    func partialFailure() {
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 2, partialErrors: [14: 2, 25: 1]).errorClass == .userAction)
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 2, partialErrors: [14: 2, 26: 1, 3: 9]).errorClass == .dataLoss)
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 2, partialErrors: [3: 1]).errorClass == .transient)
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 2, partialErrors: [12: 1, 28: 1]).errorClass == .developer)
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 2).errorClass == .unknown, "no per-item codes")
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 2, partialErrors: [14: 0]).errorClass == .unknown, "zero counts ignored")
    }

    @Test("the worst visible error decides the device's class")
    func worstVisible() {
        var f = EventFactory()
        let m = fold([
            f.network(true, at: t(0)), f.failed(.import, at: t(1), error: ckNetworkFailure), f.failed(.export, at: t(2), error: ckBadContainer),
        ])
        #expect(m.syncErrorClass == .developer)
    }
}

@Suite("CloudKit error names")
struct CloudKitNameTests {
    @Test("CloudKit codes have their CKError.Code names; other domains and unknown codes have none")
    func names() {
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 25).cloudKitName == "quotaExceeded")
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 2).cloudKitName == "partialFailure")
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 28).cloudKitName == "userDeletedZone")
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 999).cloudKitName == nil)
        #expect(SyncErrorReport(domain: "NSCocoaErrorDomain", code: 25).cloudKitName == nil)
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 26).displayName == "CKErrorDomain 26 (zoneNotFound)")
    }
}

@Suite("Error advice")
struct ErrorAdviceTests {
    @Test("every CKError code has advice, and who acts follows the code's class")
    func everyCloudKitCode() {
        for code in 1...36 {
            let error = SyncErrorReport(domain: "CKErrorDomain", code: code)
            guard let advice = error.advice else {
                Issue.record("code \(code) has no advice")
                continue
            }
            #expect(advice.text.count > 20 && advice.text.hasSuffix("."), "code \(code): one sentence")
            let expected: ErrorAdvice.Who? =
                switch error.errorClass {
                case .transient, .appRecoverable: ErrorAdvice.Who.none
                case .userAction: .user
                case .developer, .dataLoss: .developer
                case .unknown: nil
                }
            if let expected { #expect(advice.who == expected, "code \(code), class \(error.errorClass)") }
        }
        #expect(SyncErrorReport.cloudKitNames.keys.allSatisfy { ErrorAdvice.cloudKit[$0] != nil }, "every named code")
    }

    @Test("the table's facts: a bad container is the developer's, a full iCloud the user's, a lost network nobody's")
    func samples() {
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 5).advice?.who == .developer)
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 5).advice?.text.contains("entitlement") == true)
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 25).advice?.who == .user)
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 3).advice?.who == ErrorAdvice.Who.none)
        #expect(SyncErrorReport(domain: "NSCocoaErrorDomain", code: 134_400).advice?.who == .user)
        #expect(SyncErrorReport(domain: "NSCocoaErrorDomain", code: 134_301).advice?.who == .developer)
    }

    @Test("a partial failure takes the advice of its worst item; unknown domains and codes have none")
    func partialAndUnknown() {
        let partial = SyncErrorReport(domain: "CKErrorDomain", code: 2, partialErrors: [14: 3, 25: 1])
        #expect(partial.advice == SyncErrorReport(domain: "CKErrorDomain", code: 25).advice)
        let tie = SyncErrorReport(domain: "CKErrorDomain", code: 2, partialErrors: [26: 1, 28: 1])
        #expect(tie.advice == SyncErrorReport(domain: "CKErrorDomain", code: 26).advice, "ties go to the lower code")
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 2).advice == ErrorAdvice.cloudKit[2])
        #expect(SyncErrorReport(domain: "CKErrorDomain", code: 999).advice == nil)
        #expect(SyncErrorReport(domain: "NSCocoaErrorDomain", code: 4).advice == nil)
        #expect(SyncErrorReport(domain: "NSURLErrorDomain", code: -1009).advice == nil)
    }
}
