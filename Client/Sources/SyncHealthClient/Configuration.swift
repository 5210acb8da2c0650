public import Foundation

extension SyncHealthReporter {
    /// How the reporter reaches the server and where it keeps its queue.
    public struct Configuration: Sendable {
        /// The server's base URL; events go to `endpoint/v1/events`.
        public var endpoint: URL
        /// An ingest key. It is public in effect (anyone can read it out of the app), so bind it to the app on the
        /// server (`KEY@appId` in `SYNCHEALTH_INGEST_KEYS`).
        public var ingestKey: String
        /// The app's id (1-128 of `A-Z a-z 0-9 . _ : -`); the bundle identifier by default.
        public var appId: String
        /// The CloudKit container, e.g. `iCloud.com.example.notes`; also the container whose account status is read.
        public var containerId: String?
        /// The device's id; `nil` for a random id created on first launch and stored with the queue.
        public var deviceId: String?
        /// Where the queue lives; `nil` for `Application Support/SyncHealth/<appId>`. The reporter excludes it from
        /// backups, so that a backup restored onto a new device does not clone this device's id and queue. One
        /// reporter per directory: a second one in the same process reports `storageInUse` and sends nothing.
        public var storageDirectory: URL?

        /// `false` for a user who opted out: the status on the device still works, and nothing is stored or sent.
        /// When the user opts back in, `await SyncHealth.stop()` and start again with `true`: no relaunch needed.
        public var isEnabled = true
        /// Whether to report from a SwiftUI preview or a unit-test host (an app launched by XCTest or Swift
        /// Testing). `false` by default: their `App.init` runs too, and their events would pose as a user's device.
        public var reportsFromPreviewsAndTests = false

        /// The most events the queue keeps; when full, the oldest go first.
        public var maxQueuedEvents = 10_000
        /// The most bytes the queue keeps; when full, the oldest go first.
        public var maxQueuedBytes = 5 * 1024 * 1024
        /// Events per request at most.
        public var batchSize = 100
        /// The shortest time between two scheduled sends (`flush()` and going to the background send at once).
        public var sendInterval: Duration = .seconds(30)
        /// Backoff after a failed send: the first delay is drawn from `minimumRetryDelay` up, and the ceiling doubles
        /// with each failure in a row up to `maximumRetryDelay`.
        public var minimumRetryDelay: Duration = .seconds(5)
        /// The largest backoff delay.
        public var maximumRetryDelay: Duration = .seconds(15 * 60)
        /// Bodies larger than this are gzipped.
        public var compressAbove = 1024
        /// Records a heartbeat when the reporter starts, so that the server sees the launch even if nothing syncs.
        public var heartbeatOnStart = true
        /// The app's version; by default the bundle's `CFBundleShortVersionString`.
        public var appVersion: String? = Bundle.main.object(forInfoDictionaryKey: "CFBundleShortVersionString") as? String
        /// On Apple platforms: read network availability (`NWPathMonitor`, except on watchOS, where it stays
        /// unsatisfied for ordinary apps) and the iCloud account status without being asked. The account is read
        /// from `accountContainer` when the app gives one (at start and on every `CKAccountChanged`), and otherwise
        /// from what the sync engines say (CKSyncEngine's account changes, Core Data's "no account" error). The
        /// reporter never makes a `CKContainer` itself: `CKContainer(identifier:)` traps for an identifier outside
        /// the app's entitlement.
        public var observesNetworkAndAccount = true
        /// The container whose account status is read (`accountContainer` on Apple platforms).
        var accountContainerObject: Unchecked<AnyObject>?
        /// Records the events of every `NSPersistentCloudKitContainer` (Core Data and SwiftData) from the start, as
        /// CloudKitSyncMonitor's `startMonitoring()` does: the observer must be in place before the stores load, or
        /// their setup is missed. `false` leaves it to `observePersistentCloudKitEvents(of:)` (one container only,
        /// or none for an app that syncs with CKSyncEngine).
        public var observesPersistentCloudKitEvents = true
        /// Whether uploads are signed with App Attest: `.enabled` makes a key in the Secure Enclave on first use, has
        /// Apple attest it for the server's challenge, and signs every upload with it (docs: "App Attest").
        public var appAttest: AppAttest = .disabled
        /// How requests are sent; `URLSession` by default.
        public var transport: any ReportTransport = URLSessionTransport()
        /// Where the reporter's log lines go: `os.Logger` on Apple platforms, standard error elsewhere.
        public var log: @Sendable (String) -> Void = ReporterLog.system
        /// The platform's side effects, replaced by stand-ins in tests.
        var platform = PlatformHooks()

        /// A configuration with the defaults.
        public init(
            endpoint: URL,
            ingestKey: String,
            appId: String = Configuration.bundleIdentifier,
            containerId: String? = nil,
            deviceId: String? = nil,
            storageDirectory: URL? = nil,
            appAttest: AppAttest = .disabled
        ) {
            self.appAttest = appAttest
            self.endpoint = endpoint
            self.ingestKey = ingestKey
            self.appId = appId
            self.containerId = containerId
            self.deviceId = deviceId
            self.storageDirectory = storageDirectory
        }

        /// The main bundle's identifier, or `""` where there is none (a command-line tool); the default `appId`.
        public static var bundleIdentifier: String { Bundle.main.bundleIdentifier ?? "" }

        /// Checks what the server would refuse, so that a wrong setting fails at start, not at the first send.
        func validate() throws(SyncHealthReporterError) {
            func identifier(_ value: String, _ name: String) throws(SyncHealthReporterError) {
                let allowed = value.unicodeScalars.allSatisfy {
                    ($0.isASCII && (CharacterSet.alphanumerics.contains($0))) || ".-_:".unicodeScalars.contains($0)
                }
                guard (1...128).contains(value.count), allowed else {
                    throw .invalidConfiguration("\(name) must be 1-128 characters of A-Z a-z 0-9 . _ : -")
                }
            }
            guard !appId.isEmpty else {
                throw .invalidConfiguration("appId is empty: this process has no bundle identifier, so set appId")
            }
            try identifier(appId, "appId")
            if let deviceId { try identifier(deviceId, "deviceId") }
            guard ["http", "https"].contains(endpoint.scheme?.lowercased() ?? "") else {
                throw .invalidConfiguration("endpoint must be an http or https URL")
            }
            guard !ingestKey.isEmpty else { throw .invalidConfiguration("ingestKey is empty") }
            guard batchSize >= 1, batchSize <= 1000 else { throw .invalidConfiguration("batchSize must be 1-1000") }
            guard maxQueuedEvents >= 1, maxQueuedBytes >= 1024 else { throw .invalidConfiguration("the queue limits are too small") }
        }

        /// The queue's directory.
        var resolvedStorageDirectory: URL {
            if let storageDirectory { return storageDirectory }
            let base =
                FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
                ?? FileManager.default.temporaryDirectory
            return base.appendingPathComponent("SyncHealth", isDirectory: true).appendingPathComponent(appId, isDirectory: true)
        }

        /// `POST` target.
        var eventsURL: URL { endpoint.appendingPathComponent("v1").appendingPathComponent("events") }
        var attestURL: URL { endpoint.appendingPathComponent("v1").appendingPathComponent("attest") }
        var challengeURL: URL { attestURL.appendingPathComponent("challenge") }
        var tokenURL: URL { attestURL.appendingPathComponent("token") }
    }
}

/// What can go wrong in reporting.
public enum SyncHealthReporterError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The configuration cannot work (`init` throws this).
    case invalidConfiguration(String)
    /// The server refused the key (`401`) or its scope (`403`): sending stopped until `updateIngestKey(_:)`.
    case refused(status: Int, detail: String)
    /// The server asked to wait (`429`/`503` with `Retry-After`); the events stay queued.
    case rateLimited(retryAfter: Duration)
    /// The send failed (network, server error); the events stay queued and are retried with backoff.
    case deliveryFailed(String)
    /// The queue could not be read or written; recorded events wait in memory (up to `maxQueuedEvents`).
    case storageFailed(String)
    /// Another reporter in this process already uses this storage directory: this one sends nothing.
    case storageInUse(String)
    /// `shutdown()` was called.
    case shutDown
    /// Reporting is off: `isEnabled` is `false`, or the process is a SwiftUI preview or a unit-test host.
    case notEnabled(String)

    public var description: String {
        switch self {
        case .invalidConfiguration(let d): "invalid configuration: \(d)"
        case .refused(let status, let d): "the server refused the key (\(status)): \(d)"
        case .rateLimited(let after): "the server asked to wait \(after)"
        case .deliveryFailed(let d): "delivery failed: \(d)"
        case .storageFailed(let d): "the queue's storage failed: \(d)"
        case .storageInUse(let path): "another reporter in this process uses \(path); this one sends nothing"
        case .shutDown: "the reporter is shut down"
        case .notEnabled(let why): "reporting is off: \(why)"
        }
    }
}

/// The default log sinks.
public enum ReporterLog {
    /// `os.Logger` (subsystem `SyncHealthClient`) on Apple platforms, standard error elsewhere.
    ///
    /// A line's paths are shown from the home directory (`~/Library/…`): on a Mac the home directory's path holds
    /// the user's name, and the unified log is readable by any admin of the machine.
    public static let system: @Sendable (String) -> Void = { message in
        let message = withoutHome(message)
        #if canImport(os)
        systemLogger.notice("\(message, privacy: .public)")
        #else
        FileHandle.standardError.write(Data(("SyncHealthClient: " + message + "\n").utf8))
        #endif
    }

    /// `message` with every occurrence of the home directory's path written `~`.
    static func withoutHome(_ message: String, home: String = NSHomeDirectory()) -> String {
        let home = home.hasSuffix("/") ? String(home.dropLast()) : home
        guard home.count > 1 else { return message }
        return message.replacingOccurrences(of: home, with: "~")
    }
}

#if canImport(os)
import os
private let systemLogger = Logger(subsystem: "SyncHealthClient", category: "reporter")
#endif
