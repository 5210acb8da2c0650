public import Foundation

/// One thing that happened to the app's sync, as the app (or one of the package's event sources) records it.
///
/// Every event kind of the API contract has a case. The reporter gives each event its id and time when it is
/// recorded.
public enum SyncEvent: Sendable, Hashable {
    /// A setup, import or export activity started or ended. A start and its end share `activityId`.
    /// `startedAt` defaults to the time of a `started` event; `endedAt` to the time of an ended one.
    case activity(
        phase: Phase,
        state: ActivityState,
        activityId: String? = nil,
        startedAt: Date? = nil,
        endedAt: Date? = nil,
        error: SyncErrorReport? = nil
    )
    /// The network became available or unavailable.
    case network(available: Bool)
    /// The iCloud account status, as `CKContainer.accountStatus()` reads it.
    case account(status: AccountStatus)
    /// Local changes waiting to be exported, and when the oldest of them was made.
    case pending(count: Int, oldestPendingAt: Date? = nil)
    /// A sign of life; it carries the summary the reporter computes on the device.
    case heartbeat
}

extension SyncEvent {
    /// The monitor's event, with its id and time.
    func deviceEvent(id: String, at date: Date, clientSummary: SyncStateSummary?) -> DeviceEvent {
        let at = Timestamp(date)
        let body: DeviceEvent.Body
        switch self {
        case let .activity(phase, state, activityId, startedAt, endedAt, error):
            body = .activity(
                .init(
                    phase: phase,
                    state: state,
                    startedAt: startedAt.map(Timestamp.init),
                    endedAt: endedAt.map(Timestamp.init),
                    activityId: activityId,
                    error: state == .failed ? error : nil
                )
            )
        case let .network(available):
            body = .network(available: available)
        case let .account(status):
            body = .account(status)
        case let .pending(count, oldest):
            body = .pending(count: max(0, count), oldestPendingAt: count > 0 ? oldest.map(Timestamp.init) : nil)
        case .heartbeat:
            body = .heartbeat(clientSummary: clientSummary)
        }
        return DeviceEvent(eventId: id, occurredAt: at, body: body)
    }
}

extension Timestamp {
    /// The timestamp of a `Date`, to the microsecond.
    public init(_ date: Date) {
        self.init(seconds: date.timeIntervalSince1970)
    }

    /// The `Date` of this timestamp.
    public var date: Date { Date(timeIntervalSince1970: seconds) }
}

extension Date {
    /// The date of a monitor timestamp (`startedAt`, `endedAt`, `oldestPendingAt` of the status).
    public init(_ timestamp: Timestamp) {
        self.init(timeIntervalSince1970: timestamp.seconds)
    }
}
