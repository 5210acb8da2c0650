import Foundation

/// Reads the iCloud account status: `CKContainer.accountStatus` on Apple platforms, stand-ins in tests.
protocol AccountStatusReading: Sendable {
    /// Reads the status once; `completion` may run on any thread.
    func read(_ completion: @escaping @Sendable (AccountStatus) -> Void)
}

/// What the reporter does to the platform beyond its queue files, kept apart so that tests can put stand-ins
/// in and see what was done.
struct PlatformHooks: Sendable {
    /// Keeps the storage directory out of backups (`isExcludedFromBackup`), so that restoring a backup onto a new
    /// device does not clone the device id and send the old device's queue as the new one's.
    var excludeFromBackup: @Sendable (URL) throws -> Void = { directory in
        var url = directory
        var values = URLResourceValues()
        values.isExcludedFromBackup = true
        try url.setResourceValues(values)
    }

    /// Makes the account reader for the container the app gave (`accountContainer`); `nil` for an object that is
    /// not one. It never makes a container.
    var makeAccountReader: (@Sendable (AnyObject) -> (any AccountStatusReading)?)? = PlatformHooks.systemAccountReader

    /// Whether `NWPathMonitor` can tell network availability here. On watchOS it stays unsatisfied for ordinary
    /// apps (TN3135), so the network is taken as available there: CloudKit's own network errors still show.
    var canObserveNetwork: Bool = {
        #if os(watchOS)
        false
        #else
        true
        #endif
    }()

    /// Observes every `NSPersistentCloudKitContainer`'s events (`observePersistentCloudKitEvents()` where Core Data
    /// exists); `nil` elsewhere.
    var observeAllPersistentCloudKitEvents: (@Sendable (SyncHealthReporter) -> Void)? = PlatformHooks.systemObserveAllPersistentCloudKitEvents

    /// The process's environment: Xcode marks previews (`XCODE_RUNNING_FOR_PREVIEWS`) and test hosts
    /// (`XCTestConfigurationFilePath`, `XCTestBundlePath`, `XCTestSessionIdentifier`) there.
    var environment: @Sendable () -> [String: String] = { ProcessInfo.processInfo.environment }

    /// Why this process is not one to report from (a SwiftUI preview, a unit-test host); `nil` for an app's own run.
    var host: String? {
        let environment = environment()
        if environment["XCODE_RUNNING_FOR_PREVIEWS"] == "1" { return "a SwiftUI preview" }
        let testKeys = ["XCTestConfigurationFilePath", "XCTestBundlePath", "XCTestSessionIdentifier"]
        if testKeys.contains(where: { environment[$0] != nil }) { return "a unit-test host" }
        return nil
    }

    /// After an account read that answered `couldNotDetermine`, when to read again: the next delay for each such
    /// answer in a row, then only on `CKAccountChanged`.
    var accountRereadDelays: [Duration] = [.seconds(10), .seconds(30), .seconds(120), .seconds(600), .seconds(1800)]

    /// Runs before each append to the queue's file; a stand-in throws here to play a full disk.
    var beforeQueueWrite: (@Sendable () throws -> Void)?
}

/// The storage directories that a reporter of this process holds: two reporters appending to one `events.log`
/// would interleave their lines and acknowledge each other's events.
enum DirectoryClaims {
    private static let claimed = Locked(Set<String>())

    /// Claims `directory`; `false` when another reporter holds it.
    static func claim(_ directory: URL) -> Bool {
        claimed.withLock { $0.insert(key(directory)).inserted }
    }

    /// Gives `directory` back.
    static func release(_ directory: URL) {
        _ = claimed.withLock { $0.remove(key(directory)) }
    }

    private static func key(_ directory: URL) -> String {
        directory.standardizedFileURL.resolvingSymlinksInPath().path
    }
}
