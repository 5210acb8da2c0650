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
