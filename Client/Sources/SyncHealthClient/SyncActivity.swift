public import Foundation

/// One sync activity under way, from `SyncHealthReporter.begin(_:)` to its end. For engines that report
/// through completion handlers (SyncKit) or not at all (Cirrus's fire-and-forget calls), where `track` does
/// not fit:
///
/// ```swift
/// let op = reporter.begin(.import)
/// synchronizer.synchronize { error in op.finished(error: error) }
/// ```
///
/// Only the first end counts; later ones are ignored. An activity that never ends stays in progress, which the
/// server's `syncStalled` rule watches.
public final class SyncActivity: Sendable {
    /// The phase it reports.
    public let phase: Phase
    /// Shared by its start and its end.
    public let activityId: String
    /// When it began.
    public let startedAt: Date
    private let reporter: SyncHealthReporter
    private let ended = Locked(false)

    init(reporter: SyncHealthReporter, phase: Phase, startedAt: Date) {
        self.reporter = reporter
        self.phase = phase
        self.activityId = UUID().uuidString
        self.startedAt = startedAt
        reporter.record(.activity(phase: phase, state: .started, activityId: activityId, startedAt: startedAt), at: startedAt)
    }

    /// Records that it succeeded.
    public func succeeded() {
        end(.succeeded, error: nil)
    }

    /// Records that it failed with `error` (its domain and code are reported; Core Data's wrappers are looked
    /// through to the CloudKit error underneath).
    public func failed(_ error: any Error) {
        end(.failed, error: SyncErrorReport(error: error))
    }

    /// Records its end as a completion handler reports it: succeeded when `error` is `nil`, failed otherwise.
    public func finished(error: (any Error)?) {
        if let error { failed(error) } else { succeeded() }
    }

    private func end(_ state: ActivityState, error: SyncErrorReport?) {
        let first = ended.withLock { ended in
            defer { ended = true }
            return !ended
        }
        guard first else { return }
        reporter.record(.activity(phase: phase, state: state, activityId: activityId, startedAt: startedAt, error: error))
    }
}

extension SyncHealthReporter {
    /// Records the start of an activity of `phase` now; end it with the handle's `succeeded()`, `failed(_:)` or
    /// `finished(error:)`.
    public func begin(_ phase: Phase) -> SyncActivity {
        SyncActivity(reporter: self, phase: phase, startedAt: Date())
    }

    /// Records the start of an activity of `phase`, runs `body`, and records its end: succeeded, or failed with
    /// the error `body` threw. For sync engines with `async` calls; `begin(_:)` for completion handlers.
    public func track<T>(_ phase: Phase, _ body: () async throws -> T) async rethrows -> T {
        let activity = begin(phase)
        do {
            let value = try await body()
            activity.succeeded()
            return value
        } catch {
            activity.failed(error)
            throw error
        }
    }
}
