public import Foundation

/// What the reporter reads from one `NSPersistentCloudKitContainer.Event`. Core Data's event conforms (on
/// Apple platforms); tests use stand-ins.
public protocol PersistentCloudKitEventDescribing {
    /// The phase, or `nil` for an event type this package does not know.
    var phase: Phase? { get }
    /// Shared by the notification at the start of an activity and the one at its end.
    var identifier: UUID { get }
    var startDate: Date { get }
    /// `nil` while the activity runs.
    var endDate: Date? { get }
    var succeeded: Bool { get }
    var error: (any Error)? { get }
}

extension SyncEvent {
    /// The event for one `eventChangedNotification`. The container posts twice per activity, at its start
    /// (`endDate == nil`) and at its end; both carry the event's `identifier` as `activityId`. A start without an
    /// end stays `inProgress` (the server's `syncStalled` rule watches it), never success.
    public init?(persistentCloudKitEvent event: some PersistentCloudKitEventDescribing) {
        guard let phase = event.phase else { return nil }
        let activityId = event.identifier.uuidString
        guard let endDate = event.endDate else {
            self = .activity(phase: phase, state: .started, activityId: activityId, startedAt: event.startDate)
            return
        }
        if event.succeeded {
            self = .activity(phase: phase, state: .succeeded, activityId: activityId, startedAt: event.startDate, endedAt: endDate)
        } else {
            self = .activity(
                phase: phase,
                state: .failed,
                activityId: activityId,
                startedAt: event.startDate,
                endedAt: endDate,
                error: event.error.map(SyncErrorReport.init(error:))
            )
        }
    }
}

extension SyncHealthReporter {
    /// Records one `NSPersistentCloudKitContainer` event (the observer calls this; so can an app that observes
    /// the notification itself).
    public func record(persistentCloudKitEvent event: some PersistentCloudKitEventDescribing) {
        guard let mapped = SyncEvent(persistentCloudKitEvent: event) else { return }
        // Core Data's "no account" (`NSCocoaErrorDomain` 134400): the device has no iCloud account. Recorded as the
        // account first, so that the summary is CloudKitSyncMonitor's "No iCloud account", not "Error": with no
        // account nothing succeeds, and without a container given nothing else would read it.
        if event.endDate != nil, !event.succeeded, let error = event.error.map({ $0 as NSError }),
            error.domain == NSCocoaErrorDomain, error.code == Self.noAccountCode
        {
            accountChanged(.noAccount)
        }
        record(mapped, at: event.endDate ?? event.startDate)
    }

    /// `NSCocoaErrorDomain` code of Core Data's mirroring when the device has no iCloud account (not in Core
    /// Data's public headers).
    static let noAccountCode = 134_400
}
