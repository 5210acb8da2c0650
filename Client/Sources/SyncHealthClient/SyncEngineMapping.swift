public import Foundation

/// The `CKSyncEngine.Event`s the reporter reads, in the package's own terms, so that the mapping is tested on
/// every platform. On Apple platforms `reporter.handle(_:syncEngine:)` converts the engine's events.
public enum SyncEngineEvent: Sendable {
    /// `.accountChange`.
    case accountChange(AccountChange)
    /// `.willFetchChanges`.
    case willFetchChanges
    /// `.didFetchRecordZoneChanges`, with the zone's error if its fetch failed.
    case didFetchRecordZoneChanges(error: SyncErrorReport?)
    /// `.didFetchChanges`.
    case didFetchChanges
    /// `.willSendChanges`.
    case willSendChanges
    /// `.sentRecordZoneChanges`: the `CKError` codes of the saves and deletes that failed.
    case sentRecordZoneChanges(failedCodes: [Int])
    /// `.didSendChanges`.
    case didSendChanges
    /// Any other event (`stateUpdate`, `fetchedDatabaseChanges`, ...): only its pending count is read.
    case other

    /// `CKSyncEngine.Event.AccountChange.ChangeType`.
    public enum AccountChange: Sendable {
        case signIn, signOut, switchAccounts
    }
}

/// Turns a `CKSyncEngine`'s events into the contract's: fetch is import, send is export.
///
/// | CKSyncEngine event | recorded |
/// |---|---|
/// | first event handled after launch | setup `succeeded` (the engine exists and runs) |
/// | `willFetchChanges` | import `started` |
/// | `didFetchRecordZoneChanges` with an error | kept for the end of the fetch |
/// | `didFetchChanges` | import `succeeded`, or `failed` with the last zone error |
/// | `willSendChanges` | export `started` |
/// | `sentRecordZoneChanges` with failed saves/deletes | their codes, kept for the end of the send, except the routine ones |
/// | `didSendChanges` | export `succeeded`, or `failed` as `partialFailure` with the count per code |
/// | `accountChange` | account `available` (sign in, switch) or `noAccount` (sign out) |
/// | any event, `stateUpdate` included, whose pending count differs from the last reported | `pending` |
///
/// The routine per-record failures (`routineRecordCodes`) are part of how an app works with the engine: it
/// resolves them (merges the server's record, re-creates it, re-sends the batch) and the engine sends again. They
/// are not an export failure. Pending changes are reported whenever their count changes, so that changes piling
/// up offline (the engine posts `stateUpdate` as they are added) are seen before any send.
public struct SyncEngineMapping: Sendable {
    private var setupReported = false
    private var fetch: (id: String, startedAt: Date, error: SyncErrorReport?)?
    private var send: (id: String, startedAt: Date, failedCodes: [Int])?
    private var pendingSince: Date?
    private var reportedPending: Int?

    /// `CKError` codes of a failed save or delete that the app resolves and the engine retries:
    /// `unknownItem` (11), `serverRecordChanged` (14), `batchRequestFailed` (22).
    public static let routineRecordCodes: Set<Int> = [11, 14, 22]

    /// A mapping at launch.
    public init() {}

    /// The events to record for one engine event; `pendingChanges` is `syncEngine.state.pendingRecordZoneChanges.count`.
    public mutating func events(for event: SyncEngineEvent, pendingChanges: Int, now: Date) -> [SyncEvent] {
        var out: [SyncEvent] = []
        if !setupReported {
            setupReported = true
            out.append(.activity(phase: .setup, state: .succeeded, startedAt: now, endedAt: now))
        }
        switch event {
        case .accountChange(let change):
            out.append(.account(status: change == .signOut ? .noAccount : .available))
        case .willFetchChanges:
            let id = UUID().uuidString
            fetch = (id, now, nil)
            out.append(.activity(phase: .import, state: .started, activityId: id, startedAt: now))
        case .didFetchRecordZoneChanges(let error):
            if let error { fetch?.error = error }
        case .didFetchChanges:
            let f = fetch ?? (UUID().uuidString, now, nil)
            fetch = nil
            if let error = f.error {
                out.append(.activity(phase: .import, state: .failed, activityId: f.id, startedAt: f.startedAt, endedAt: now, error: error))
            } else {
                out.append(.activity(phase: .import, state: .succeeded, activityId: f.id, startedAt: f.startedAt, endedAt: now))
            }
        case .willSendChanges:
            let id = UUID().uuidString
            send = (id, now, [])
            out.append(.activity(phase: .export, state: .started, activityId: id, startedAt: now))
        case .sentRecordZoneChanges(let codes):
            if send == nil { send = (UUID().uuidString, now, []) }
            send?.failedCodes += codes.filter { !Self.routineRecordCodes.contains($0) }
        case .didSendChanges:
            let s = send ?? (UUID().uuidString, now, [])
            send = nil
            if s.failedCodes.isEmpty {
                out.append(.activity(phase: .export, state: .succeeded, activityId: s.id, startedAt: s.startedAt, endedAt: now))
            } else {
                out.append(
                    .activity(
                        phase: .export,
                        state: .failed,
                        activityId: s.id,
                        startedAt: s.startedAt,
                        endedAt: now,
                        error: .partialFailure(itemCodes: s.failedCodes)
                    )
                )
            }
        case .other:
            break
        }
        if pendingChanges != reportedPending {
            reportedPending = pendingChanges
            // The engine does not say how old its pending changes are: the oldest is dated from when the count
            // last left zero.
            pendingSince = pendingChanges > 0 ? (pendingSince ?? now) : nil
            out.append(.pending(count: pendingChanges, oldestPendingAt: pendingSince))
        }
        return out
    }
}

extension SyncHealthReporter {
    /// Records what one `CKSyncEngine` event means (see `SyncEngineMapping`). Call it from the delegate's
    /// `handleEvent`; on Apple platforms `handle(_:syncEngine:)` does the conversion.
    public func handle(_ event: SyncEngineEvent, pendingChanges: Int) {
        let now = Date()
        let events = shared.withLock { $0.sources.syncEngine.events(for: event, pendingChanges: pendingChanges, now: now) }
        for e in events { record(e, at: now) }
    }
}
