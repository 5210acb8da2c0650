import Foundation
import Testing

@testable import SyncHealthClient

/// A stand-in for `NSPersistentCloudKitContainer.Event`.
struct FakeContainerEvent: PersistentCloudKitEventDescribing {
    var phase: Phase?
    var identifier = UUID()
    var startDate = Date(timeIntervalSince1970: 1_795_000_000)
    var endDate: Date?
    var succeeded = false
    var error: (any Error)?
}

/// A CKError as Core Data and CloudKit hand it over, built with Foundation only.
func ckError(_ code: Int, partial: [Int] = [], retryAfter: Double? = nil) -> NSError {
    var info: [String: Any] = [NSLocalizedDescriptionKey: "CloudKit error \(code)"]
    if !partial.isEmpty {
        var items: [AnyHashable: any Error] = [:]
        for (i, c) in partial.enumerated() { items["record-\(i)"] = NSError(domain: "CKErrorDomain", code: c) }
        info["CKPartialErrorsByItemIDKey"] = items
    }
    if let retryAfter { info["CKRetryAfter"] = NSNumber(value: retryAfter) }
    return NSError(domain: "CKErrorDomain", code: code, userInfo: info)
}

@Suite("Mappings from the sync libraries' events")
struct MappingTests {
    @Test("NSPersistentCloudKitContainer: start and end of one activity share its identifier; a start alone is in progress")
    func containerPair() {
        var start = FakeContainerEvent(phase: .import)
        let started = SyncEvent(persistentCloudKitEvent: start)
        #expect(started == .activity(phase: .import, state: .started, activityId: start.identifier.uuidString, startedAt: start.startDate))
        start.endDate = start.startDate.addingTimeInterval(2)
        start.succeeded = true
        #expect(
            SyncEvent(persistentCloudKitEvent: start)
                == .activity(
                    phase: .import,
                    state: .succeeded,
                    activityId: start.identifier.uuidString,
                    startedAt: start.startDate,
                    endedAt: start.endDate
                )
        )
        var monitor = MonitorState()
        monitor.apply(started!.deviceEvent(id: "1", at: start.startDate, clientSummary: nil), receivedAt: Timestamp(start.startDate))
        #expect(monitor.importPhase.state.status == .inProgress, "a start without an end never looks like success")
        #expect(SyncEvent(persistentCloudKitEvent: FakeContainerEvent(phase: nil)) == nil)
    }

    @Test("NSPersistentCloudKitContainer: a failure carries the CKError code and, for partialFailure, the count per item code")
    func containerFailure() throws {
        let event = FakeContainerEvent(
            phase: .export,
            endDate: Date(timeIntervalSince1970: 1_795_000_003),
            succeeded: false,
            error: ckError(2, partial: [14, 14, 25], retryAfter: 12)
        )
        guard case let .activity(phase, state, _, _, _, error)? = SyncEvent(persistentCloudKitEvent: event) else {
            Issue.record("not an activity")
            return
        }
        #expect(phase == .export && state == .failed)
        let report = try #require(error)
        #expect(report.domain == "CKErrorDomain" && report.code == 2)
        #expect(report.partialErrors == [14: 2, 25: 1])
        #expect(report.retryAfterSeconds == 12)
        #expect(report.errorClass == .userAction, "quotaExceeded (25) is the worst item class")
    }

    @Test("CKSyncEngine: setup at the first event, fetch is import, send is export with per-code failures")
    func syncEngine() throws {
        var m = SyncEngineMapping()
        let t0 = Date(timeIntervalSince1970: 1_795_000_000)
        let first = m.events(for: .willFetchChanges, pendingChanges: 0, now: t0)
        #expect(first.count == 3)
        #expect(first[0] == .activity(phase: .setup, state: .succeeded, startedAt: t0, endedAt: t0))
        guard case let .activity(.import, .started, fetchId?, _, _, _) = first[1] else { throw MappingError() }
        #expect(first[2] == .pending(count: 0, oldestPendingAt: nil), "the count at launch is reported once")
        #expect(
            m.events(for: .didFetchChanges, pendingChanges: 0, now: t0 + 1)
                == [.activity(phase: .import, state: .succeeded, activityId: fetchId, startedAt: t0, endedAt: t0 + 1)]
        )

        let send = m.events(for: .willSendChanges, pendingChanges: 3, now: t0 + 2)
        guard case let .activity(.export, .started, sendId?, _, _, _) = send.first else { throw MappingError() }
        #expect(send.last == .pending(count: 3, oldestPendingAt: t0 + 2))
        #expect(m.events(for: .sentRecordZoneChanges(failedCodes: [25, 26]), pendingChanges: 3, now: t0 + 3).isEmpty)
        #expect(m.events(for: .sentRecordZoneChanges(failedCodes: [25]), pendingChanges: 3, now: t0 + 3).isEmpty)
        let done = m.events(for: .didSendChanges, pendingChanges: 3, now: t0 + 4)
        guard case let .activity(.export, .failed, id?, _, _, error?) = done.first else { throw MappingError() }
        #expect(id == sendId)
        #expect(error.code == 2 && error.partialErrors == [25: 2, 26: 1])
        #expect(error.errorClass == .dataLoss)
        #expect(done.count == 1, "the pending count did not change")
        // Still pending at the next send: the oldest keeps its date; zero clears it.
        _ = m.events(for: .willSendChanges, pendingChanges: 3, now: t0 + 5)
        #expect(m.events(for: .didSendChanges, pendingChanges: 1, now: t0 + 6).last == .pending(count: 1, oldestPendingAt: t0 + 2))
        _ = m.events(for: .willSendChanges, pendingChanges: 1, now: t0 + 7)
        #expect(m.events(for: .didSendChanges, pendingChanges: 0, now: t0 + 8).last == .pending(count: 0, oldestPendingAt: nil))
    }

    @Test("CKSyncEngine: the routine per-record failures (unknownItem, serverRecordChanged, batchRequestFailed) are not an export failure")
    func syncEngineRoutineRecordFailures() throws {
        var m = SyncEngineMapping()
        let t0 = Date(timeIntervalSince1970: 1_795_000_000)
        _ = m.events(for: .willSendChanges, pendingChanges: 2, now: t0)
        _ = m.events(for: .sentRecordZoneChanges(failedCodes: [14, 22, 11, 22]), pendingChanges: 2, now: t0 + 1)
        let done = m.events(for: .didSendChanges, pendingChanges: 2, now: t0 + 2)
        guard case .activity(.export, .succeeded, _, _, _, nil)? = done.first else { throw MappingError() }
        // A real failure among routine ones fails the send, and reports only the real one.
        _ = m.events(for: .willSendChanges, pendingChanges: 2, now: t0 + 3)
        _ = m.events(for: .sentRecordZoneChanges(failedCodes: [14, 25]), pendingChanges: 2, now: t0 + 4)
        guard case let .activity(.export, .failed, _, _, _, error?)? = m.events(for: .didSendChanges, pendingChanges: 2, now: t0 + 5).first
        else { throw MappingError() }
        #expect(error.partialErrors == [25: 1])
    }

    @Test("CKSyncEngine: changes piling up offline are reported as the engine's stateUpdate events come, before any send")
    func syncEnginePendingOffline() {
        var m = SyncEngineMapping()
        let t0 = Date(timeIntervalSince1970: 1_795_000_000)
        _ = m.events(for: .other, pendingChanges: 0, now: t0)
        #expect(m.events(for: .other, pendingChanges: 1, now: t0 + 10) == [.pending(count: 1, oldestPendingAt: t0 + 10)])
        #expect(m.events(for: .other, pendingChanges: 1, now: t0 + 20).isEmpty, "an unchanged count is not reported again")
        #expect(m.events(for: .other, pendingChanges: 4, now: t0 + 30) == [.pending(count: 4, oldestPendingAt: t0 + 10)])
    }

    @Test("CKSyncEngine: a zone fetch error fails the import; account changes map to available and noAccount")
    func syncEngineErrorsAndAccount() throws {
        var m = SyncEngineMapping()
        let t0 = Date(timeIntervalSince1970: 1_795_000_000)
        #expect(m.events(for: .accountChange(.signOut), pendingChanges: 0, now: t0).contains(.account(status: .noAccount)))
        #expect(m.events(for: .accountChange(.signIn), pendingChanges: 0, now: t0) == [.account(status: .available)])
        #expect(m.events(for: .accountChange(.switchAccounts), pendingChanges: 0, now: t0) == [.account(status: .available)])
        _ = m.events(for: .willFetchChanges, pendingChanges: 0, now: t0)
        let zoneMissing = SyncErrorReport(error: ckError(26))
        #expect(m.events(for: .didFetchRecordZoneChanges(error: zoneMissing), pendingChanges: 0, now: t0).isEmpty)
        guard case let .activity(.import, .failed, _, _, _, error?) = m.events(for: .didFetchChanges, pendingChanges: 0, now: t0).first else {
            throw MappingError()
        }
        #expect(error.code == 26)
        #expect(m.events(for: .other, pendingChanges: 0, now: t0).isEmpty)
    }

    @Test("Core Data's wrapper errors (NSCocoaErrorDomain 134400) report the CloudKit error underneath, with its class")
    func underlyingCloudKitError() {
        let quota = NSError(domain: "CKErrorDomain", code: 25, userInfo: [NSLocalizedDescriptionKey: "Quota exceeded"])
        let wrapped = NSError(domain: NSCocoaErrorDomain, code: 134400, userInfo: [NSUnderlyingErrorKey: quota])
        let report = SyncErrorReport(error: wrapped)
        #expect(report.domain == "CKErrorDomain" && report.code == 25)
        #expect(report.errorClass == .userAction)
        #expect(report.message?.hasPrefix("NSCocoaErrorDomain 134400: ") == true)
        // Two levels down, as a partial failure.
        let partial = ckError(2, partial: [12])
        let middle = NSError(domain: NSCocoaErrorDomain, code: 134419, userInfo: [NSUnderlyingErrorKey: partial])
        let outer = NSError(domain: NSCocoaErrorDomain, code: 134400, userInfo: [NSUnderlyingErrorKey: middle])
        #expect(SyncErrorReport(error: outer).partialErrors == [12: 1])
        #expect(SyncErrorReport(error: outer).errorClass == .developer)
        // Without a CloudKit error underneath, the wrapper is what is reported.
        let plain = NSError(domain: NSCocoaErrorDomain, code: 134060)
        #expect(SyncErrorReport(error: plain).domain == NSCocoaErrorDomain && SyncErrorReport(error: plain).errorClass == .unknown)
    }

    @Test("CloudKit's per-item messages arrive without record, zone or owner names; the rest of the message stays")
    func messagesWithoutNames() throws {
        let messages = [
            "Error saving record <CKRecordID: 0x6000012a4e40; recordName=Diary-2026-12-01, zoneID=Journal:__defaultOwner__> to server: record to insert already exists",
            #"Server Record Changed (14/2004); "record changed", recordName="Secret plan", zoneName=Private Stuff"#,
            "Zone <CKRecordZoneID: 0x600; zoneName=MyHealth, ownerName=_abc123> does not exist",
        ]
        for message in messages {
            let error = NSError(domain: "CKErrorDomain", code: 14, userInfo: [NSLocalizedDescriptionKey: message])
            let sent = try #require(SyncErrorReport(error: error).message)
            for name in ["Diary-2026-12-01", "Journal", "Secret plan", "Private Stuff", "MyHealth", "_abc123", "0x6000012a4e40"] {
                #expect(!sent.contains(name), "\(name) in \(sent)")
            }
            #expect(sent.count > 20, "\(sent)")
        }
        #expect(
            SyncErrorReport.withoutNames(messages[0]) == "Error saving record <…> to server: record to insert already exists"
        )
        #expect(SyncErrorReport.withoutNames("Quota exceeded") == "Quota exceeded")
        #expect(ReporterLog.withoutHome("cannot open /Users/jane/Library/x/events.log", home: "/Users/jane") == "cannot open ~/Library/x/events.log")
    }

    @Test("CKAccountStatus raw values map to the contract's account statuses")
    func accountStatus() {
        #expect(
            [0, 1, 2, 3, 4, 99].map(AccountStatus.init(cloudKitRawValue:))
                == [.couldNotDetermine, .available, .restricted, .noAccount, .temporarilyUnavailable, .couldNotDetermine]
        )
    }

    struct MappingError: Error {}
}
