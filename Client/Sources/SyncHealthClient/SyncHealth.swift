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
    /// the reporter already started, and logs that the new configuration was not used.
    @discardableResult
    public static func start(configuration: SyncHealthReporter.Configuration) -> SyncHealthReporter {
        current.withLock { current in
            if let current {
                configuration.log("SyncHealth.start was called again: the reporter already started goes on")
                return current
            }
            let reporter = SyncHealthReporter(starting: configuration)
            current = reporter
            return reporter
        }
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
