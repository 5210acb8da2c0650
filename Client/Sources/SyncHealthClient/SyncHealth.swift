import Foundation

/// The one-line start, and the reporter it starts:
///
/// ```swift
/// @main struct NotesApp: App {
///     init() {
///         SyncHealth.start(configuration: .init(
///             endpoint: URL(string: "https://synchealth.example.com")!, ingestKey: "…",
///             containerId: "iCloud.com.example.notes"))
///     }
///     …
/// }
/// ```
public enum SyncHealth {
    private static let current = Locked<SyncHealthReporter?>(nil)

    /// The reporter `start(configuration:)` started; `nil` before.
    public static var shared: SyncHealthReporter? { current.withLock { $0 } }

    /// Starts reporting, and returns the reporter (also `SyncHealth.shared`). Never throws and never traps: a
    /// configuration that cannot work, or a storage directory that cannot be opened, shows in
    /// `delivery.lastError` and the log, while the status on the device keeps working. Called again, it returns
    /// the reporter already started, and logs that the new configuration was not used; after `stop()` (or the
    /// reporter's `shutdown()`), it starts a new one.
    @discardableResult
    public static func start(configuration: SyncHealthReporter.Configuration) -> SyncHealthReporter {
        current.withLock { current in
            if let current, !current.isShutDown {
                configuration.log("SyncHealth.start was called again: the reporter already started goes on")
                return current
            }
            let reporter = SyncHealthReporter(starting: configuration)
            current = reporter
            return reporter
        }
    }

    /// Stops reporting: shuts the shared reporter down (what is queued stays on disk, unsent) and forgets it, so
    /// that `start(configuration:)` starts a new one. For a user who opts out: stop, then start with
    /// `isEnabled: false`, or not at all; when they opt back in, start again, in the same launch.
    public static func stop() async {
        await reset()
    }

    /// Forgets the shared reporter after shutting it down, so that a test can start another one.
    static func reset() async {
        let reporter = current.withLock { current in
            defer { current = nil }
            return current
        }
        await reporter?.shutdown()
    }
}
