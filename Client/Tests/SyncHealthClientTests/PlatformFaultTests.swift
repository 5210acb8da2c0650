import Foundation
import Testing

@testable import SyncHealthClient

/// A stand-in account reader: counts how many were made and answers `available`.
final class FakeAccountReaders: @unchecked Sendable {
    private let lock = NSLock()
    private var _made: [ObjectIdentifier] = []
    /// The containers a reader was made for.
    var made: [ObjectIdentifier] { lock.withLock { _made } }

    var factory: @Sendable (AnyObject) -> (any AccountStatusReading)? {
        { container in
            self.lock.withLock { self._made.append(ObjectIdentifier(container)) }
            return Reader()
        }
    }

    struct Reader: AccountStatusReading {
        func read(_ completion: @escaping @Sendable (AccountStatus) -> Void) { completion(.available) }
    }
}

/// A stand-in for `NSPersistentCloudKitContainer.Event`.
struct StandInContainerEvent: PersistentCloudKitEventDescribing {
    var phase: Phase? = .import
    var identifier = UUID()
    var startDate = Date()
    var endDate: Date? = Date()
    var succeeded = true
    var error: (any Error)? = nil
}

struct DiskFull: Error {}

/// A stand-in for the app's `CKContainer`.
final class StandInContainer: Sendable {}

/// A reporter that observes the account through stand-in readers (of `container`, when given), and the readers.
func reporterWithAccountReaders(container: StandInContainer? = nil) throws -> (SyncHealthReporter, FakeAccountReaders) {
    let readers = FakeAccountReaders()
    var configuration = testConfiguration(FakeServer())
    configuration.observesNetworkAndAccount = true
    configuration.platform.makeAccountReader = readers.factory
    configuration.accountContainerObject = container.map { Unchecked(value: $0) }
    return (try SyncHealthReporter(configuration: configuration), readers)
}

@Suite("The faults an app would ship, through the package's stand-ins")
struct PlatformFaultTests {
    @Test("a device id or key record that cannot be read is not replaced: the error shows, and once readable the old one is used")
    func unreadableIdentityIsKept() async throws {
        let directory = temporaryDirectory()
        var configuration = testConfiguration(FakeServer(), directory: directory)
        configuration.deviceId = nil
        // A link to itself where the file should be: reading fails, and not with "no such file".
        let idURL = directory.appendingPathComponent(DeviceIdentity.fileName)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: idURL.path, withDestinationPath: idURL.path)
        let reporter = try SyncHealthReporter(configuration: configuration)
        await #expect(throws: SyncHealthReporterError.self) { _ = try await reporter.deviceId() }
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: idURL.path) == idURL.path, "nothing written over it")
        // Readable again in one step (a rename over the link), as when the phone is unlocked.
        let ready = directory.appendingPathComponent("device-id.ready")
        try Data("device-kept".utf8).write(to: ready)
        #expect(rename(ready.path, idURL.path) == 0)
        let kept = try await reporter.deviceId()
        #expect(kept == "device-kept", "read again at the next try: \(kept)")
        await reporter.shutdown()

        let keyURL = directory.appendingPathComponent(AttestedKeyRecord.fileName)
        try FileManager.default.createDirectory(at: keyURL, withIntermediateDirectories: true)
        #expect(throws: (any Error).self) { _ = try AttestedKeyRecord.load(in: directory) }
        try FileManager.default.removeItem(at: keyURL)
        #expect(try AttestedKeyRecord.load(in: directory).keyId == nil, "no file: an empty record")
        #expect(StorageFiles.isNoSuchFile(CocoaError(.fileReadNoSuchFile)) && !StorageFiles.isNoSuchFile(CocoaError(.fileReadNoPermission)))
    }

    @Test("an account read that could not determine the status is read again later, until it can; then no more reads")
    func undeterminedAccountIsReadAgain() async throws {
        struct Scripted: AccountStatusReading {
            let answers: Locked<[AccountStatus]>
            let reads: Locked<Int>
            func read(_ completion: @escaping @Sendable (AccountStatus) -> Void) {
                reads.withLock { $0 += 1 }
                completion(answers.withLock { $0.isEmpty ? .available : $0.removeFirst() })
            }
        }
        let reader = Scripted(answers: Locked([.couldNotDetermine, .couldNotDetermine]), reads: Locked(0))
        var configuration = testConfiguration(FakeServer())
        configuration.observesNetworkAndAccount = true
        configuration.platform.makeAccountReader = { _ in reader }
        configuration.platform.accountRereadDelays = [.milliseconds(20), .milliseconds(20), .milliseconds(20)]
        configuration.accountContainerObject = Unchecked(value: StandInContainer())
        let reporter = try SyncHealthReporter(configuration: configuration)
        var available = false
        for _ in 0..<200 where !available {
            try await Task.sleep(for: .milliseconds(10))
            available = reporter.status.state.account == .available
        }
        #expect(available, "the third read found the account")
        try await Task.sleep(for: .milliseconds(200))
        #expect(reader.reads.withLock { $0 } == 3, "read at start, then twice more, then no more")
        await reporter.shutdown()
    }

    @Test("the storage directory is excluded from backups before the device id is written into it")
    func backupExclusion() async throws {
        let directory = temporaryDirectory().appendingPathComponent("queue")
        let seen = Locked<[(URL, Bool)]>([])
        var configuration = testConfiguration(FakeServer(), directory: directory)
        configuration.deviceId = nil
        configuration.platform.excludeFromBackup = { url in
            let idExists = FileManager.default.fileExists(atPath: url.appendingPathComponent("device-id").path)
            seen.withLock { $0.append((url, idExists)) }
        }
        let reporter = try SyncHealthReporter(configuration: configuration)
        let id = try await reporter.deviceId()
        #expect(!id.isEmpty)
        let calls = seen.withLock { $0 }
        #expect(calls.count == 1)
        #expect(calls.first?.0.standardizedFileURL == directory.standardizedFileURL)
        #expect(calls.first?.1 == false, "excluded before the id was written")
        await reporter.shutdown()
    }

    @Test("no container is ever made from containerId: without accountContainer nothing reads the account, whatever succeeds")
    func noContainerFromAString() async throws {
        let (reporter, readers) = try reporterWithAccountReaders()
        reporter.record(.activity(phase: .setup, state: .succeeded))
        reporter.record(.activity(phase: .import, state: .succeeded))
        reporter.accountMayHaveChanged()
        #expect(readers.made.isEmpty, "containerId alone makes no container")
        #expect(reporter.status.state.account == nil)
        await reporter.shutdown()
    }

    @Test("with the app's container, its account is read at start, once made, and again on an account change")
    func accountOfTheAppsContainer() async throws {
        let container = StandInContainer()
        let (reporter, readers) = try reporterWithAccountReaders(container: container)
        #expect(readers.made == [ObjectIdentifier(container)])
        #expect(reporter.status.state.account == .available, "read at start, before any sync")
        reporter.accountMayHaveChanged()
        reporter.record(.activity(phase: .setup, state: .succeeded))
        #expect(readers.made.count == 1, "one reader for the reporter's life")
        await reporter.shutdown()
    }

    @Test("Core Data's 134400 is no iCloud account (gray, not a red Error); a success after sign-in makes it available")
    func noAccountFromCoreData() async throws {
        let (reporter, _) = try reporterWithAccountReaders()
        let failure = StandInContainerEvent(
            phase: .setup,
            succeeded: false,
            error: NSError(domain: NSCocoaErrorDomain, code: 134_400, userInfo: [NSLocalizedDescriptionKey: "no account"])
        )
        reporter.record(persistentCloudKitEvent: failure)
        #expect(reporter.status.state.account == .noAccount)
        #expect(reporter.status.syncStateSummary == .accountNotAvailable, "\(reporter.status.syncStateSummary)")
        reporter.record(persistentCloudKitEvent: StandInContainerEvent(phase: .setup, succeeded: true))
        #expect(reporter.status.state.account == .available)
        // Another Core Data error says nothing of the account.
        let (other, _) = try reporterWithAccountReaders()
        other.record(
            persistentCloudKitEvent: StandInContainerEvent(
                phase: .export,
                succeeded: false,
                error: NSError(domain: NSCocoaErrorDomain, code: 134_060)
            )
        )
        #expect(other.status.state.account == nil)
        await reporter.shutdown()
        await other.shutdown()
    }

    @Test("events recorded while the disk refuses the append stay in memory, and reach the server once it takes them")
    func inboxKeptOnFailedAppend() async throws {
        let server = FakeServer()
        let full = Locked(true)
        let directory = temporaryDirectory()
        var configuration = testConfiguration(server, directory: directory)
        configuration.platform.beforeQueueWrite = { if full.withLock({ $0 }) { throw DiskFull() } }
        let reporter = try SyncHealthReporter(configuration: configuration)
        for i in 1...5 { reporter.record(.pending(count: i)) }
        await #expect(throws: SyncHealthReporterError.self) { try await reporter.flush() }
        #expect(server.requests.isEmpty)
        guard case .storageFailed? = reporter.delivery.lastError else {
            Issue.record("expected storageFailed, got \(String(describing: reporter.delivery.lastError))")
            return
        }
        let log = try String(contentsOf: directory.appendingPathComponent("events.log"), encoding: .utf8)
        #expect(log.isEmpty, "nothing half-written")
        full.withLock { $0 = false }
        reporter.record(.pending(count: 6))
        try await reporter.flush()
        let counts = (server.requests.last?.json["events"] as? [[String: Any]] ?? []).compactMap { $0["pendingChanges"] as? Int }
        #expect(counts == [1, 2, 3, 4, 5, 6])
        await reporter.shutdown()
    }

    @Test("while the disk refuses, memory holds maxQueuedEvents at most, the oldest dropped and counted")
    func inboxBoundedWhileDiskRefuses() async throws {
        var configuration = testConfiguration(FakeServer())
        configuration.maxQueuedEvents = 3
        configuration.platform.beforeQueueWrite = { throw DiskFull() }
        let reporter = try SyncHealthReporter(configuration: configuration)
        for i in 1...10 { reporter.record(.pending(count: i)) }
        await #expect(throws: SyncHealthReporterError.self) { try await reporter.flush() }
        #expect(reporter.shared.withLock { $0.inbox.count } == 3)
        #expect(reporter.delivery.droppedEvents == 7)
        await reporter.shutdown()
    }

    @Test("observing a container's events twice, or one container while all are observed, records each event once")
    func observingTwice() async throws {
        let server = FakeServer()
        let reporter = try SyncHealthReporter(configuration: testConfiguration(server))
        let name = Notification.Name("SyncHealthClientTests.event-\(UUID().uuidString)")
        let container = NSObject()
        let read: @Sendable (Notification) -> (any PersistentCloudKitEventDescribing)? = { $0.userInfo?["event"] as? StandInContainerEvent }
        reporter.observePersistentCloudKitNotifications(named: name, of: container, event: read)
        reporter.observePersistentCloudKitNotifications(named: name, of: container, event: read)
        NotificationCenter.default.post(name: name, object: container, userInfo: ["event": StandInContainerEvent()])
        // Every container replaces the single one; a single one after that adds nothing.
        reporter.observePersistentCloudKitNotifications(named: name, of: nil, event: read)
        reporter.observePersistentCloudKitNotifications(named: name, of: container, event: read)
        NotificationCenter.default.post(name: name, object: container, userInfo: ["event": StandInContainerEvent()])
        try await reporter.flush()
        #expect(server.deliveredIds.count == 2)
        await reporter.shutdown()
        NotificationCenter.default.post(name: name, object: container, userInfo: ["event": StandInContainerEvent()])
        #expect(reporter.shared.withLock { $0.inbox.count } == 0, "shutdown removes the observers")
    }

    @Test("a second reporter on the same directory says so in its status and sends nothing; after shutdown the directory is free")
    func oneReporterPerDirectory() async throws {
        let server = FakeServer()
        let directory = temporaryDirectory()
        var first: SyncHealthReporter? = try SyncHealthReporter(configuration: testConfiguration(server, directory: directory))
        let sameDirectory = directory.appendingPathComponent("../\(directory.lastPathComponent)")
        let second = try SyncHealthReporter(configuration: testConfiguration(server, directory: sameDirectory))
        #expect(second.delivery.lastError == .storageInUse(sameDirectory.path))
        second.record(.network(available: false))
        #expect(second.status.syncStateSummary == .noNetwork, "its status on the device still works")
        await #expect(throws: SyncHealthReporterError.self) { try await second.flush() }
        first?.record(.network(available: true))
        try await first?.flush()
        #expect(server.deliveredIds.count == 1)
        await first?.shutdown()
        await second.shutdown()
        let third = try SyncHealthReporter(configuration: testConfiguration(server, directory: directory))
        #expect(third.delivery.lastError == nil)
        // The first reporter, gone now, must not give back the directory that the third holds.
        first = nil
        let fourth = try SyncHealthReporter(configuration: testConfiguration(server, directory: directory))
        #expect(fourth.delivery.lastError == .storageInUse(directory.path))
        await third.shutdown()
        await fourth.shutdown()
    }

    @Test("CKSyncEngine's pending count is recorded from stateUpdate events while offline, before any send")
    func pendingRecordedOffline() async throws {
        let server = FakeServer()
        let reporter = try SyncHealthReporter(configuration: testConfiguration(server))
        reporter.record(.network(available: false))
        reporter.handle(.other, pendingChanges: 1)
        reporter.handle(.other, pendingChanges: 2)
        #expect(reporter.status.state.pendingChanges == 2)
        try await reporter.flush()
        let counts = server.requests.flatMap { ($0.json["events"] as? [[String: Any]] ?? []).compactMap { $0["pendingChanges"] as? Int } }
        #expect(counts == [1, 2])
        await reporter.shutdown()
    }
}

@Suite("Platform sources that cannot be read")
struct UnreadableSourceTests {
    @Test("where NWPathMonitor cannot tell (watchOS), the network is taken as available, so errors still show")
    func networkTakenAsAvailable() async throws {
        var configuration = testConfiguration(FakeServer())
        configuration.observesNetworkAndAccount = true
        configuration.platform.canObserveNetwork = false
        configuration.platform.makeAccountReader = nil
        let reporter = try SyncHealthReporter(configuration: configuration)
        #expect(reporter.status.state.network == true)
        reporter.record(.activity(phase: .export, state: .failed, error: SyncErrorReport(domain: "CKErrorDomain", code: 5)))
        #expect(reporter.status.syncStateSummary == .error)
        await reporter.shutdown()
    }

    @Test("a storage directory that cannot be made shows in the status and the log, once, and never traps")
    func storageThatCannotBeOpened() async throws {
        let file = temporaryDirectory().appendingPathComponent("a-file")
        try Data("x".utf8).write(to: file)
        var configuration = testConfiguration(FakeServer(), directory: file.appendingPathComponent("queue"))
        let logged = Locked<[String]>([])
        configuration.log = { line in logged.withLock { $0.append(line) } }
        let reporter = SyncHealthReporter(starting: configuration)  // what SyncHealth.start makes
        reporter.record(.network(available: true))
        await #expect(throws: SyncHealthReporterError.self) { try await reporter.flush() }
        await #expect(throws: SyncHealthReporterError.self) { try await reporter.flush() }
        guard case .storageFailed? = reporter.delivery.lastError else {
            Issue.record("expected storageFailed, got \(String(describing: reporter.delivery.lastError))")
            return
        }
        #expect(logged.withLock { $0 }.filter { $0.contains("storage failed") }.count == 1, "\(logged.withLock { $0 })")
        #expect(reporter.status.state.network == true)
        await reporter.shutdown()
    }
}

@Suite("Erasing what the device keeps")
struct EraseLocalDataTests {
    @Test("eraseLocalData deletes the unsent queue and the device id; later events go under a new id, alone")
    func eraseLocalData() async throws {
        let server = FakeServer()
        let directory = temporaryDirectory()
        var configuration = testConfiguration(server, directory: directory)
        configuration.deviceId = nil
        let reporter = try SyncHealthReporter(configuration: configuration)
        let before = try await reporter.deviceId()
        server.then(status: 503)
        reporter.networkChanged(available: true)
        reporter.record(.activity(phase: .export, state: .failed, error: SyncErrorReport(domain: "CKErrorDomain", code: 25)))
        await #expect(throws: SyncHealthReporterError.self) { try await reporter.flush() }
        #expect(reporter.delivery.queuedEvents == 2)
        #expect(reporter.status.syncStateSummary == .error)

        try await reporter.eraseLocalData()
        #expect(reporter.delivery.queuedEvents == 0 && reporter.delivery.lastError == nil)
        // The erasure records the network again at once, so the delivery loop may already have made the new id:
        // what must be gone is the old one.
        let stored = try? String(contentsOf: directory.appendingPathComponent("device-id"), encoding: .utf8)
        #expect(stored.map { !$0.contains(before) } ?? true, "the old device id is still stored")
        #expect(reporter.status.syncStateSummary == .notStarted, "the status starts again")
        #expect(reporter.status.state.network == true, "with the network as last read")

        reporter.record(.heartbeat)
        try await reporter.flush()
        let after = try await reporter.deviceId()
        #expect(after != before)
        let sent = try #require(server.requests.last)
        #expect((sent.json["device"] as? [String: Any])?["deviceId"] as? String == after)
        let kinds = (sent.json["events"] as? [[String: Any]] ?? []).compactMap { $0["kind"] as? String }
        #expect(kinds == ["network", "heartbeat"], "nothing recorded before the erasure is sent")
        await reporter.shutdown()
    }
}

/// A transport whose requests never end unless cancelled.
struct NeverAnswering: ReportTransport {
    func post(_ body: Data, to url: URL, headers: [String: String]) async throws -> TransportResponse {
        try await Task.sleep(for: .seconds(3600))
        return TransportResponse(status: 202)
    }
}

@Suite("Suspension, discarding and the status's order")
struct LifecycleTests {
    @Test("a flush cancelled when the background time expires is no delivery failure: no error shown, no backoff")
    func expiryIsNoFailure() async throws {
        let server = FakeServer()
        let directory = temporaryDirectory()
        var configuration = testConfiguration(server, directory: directory)
        configuration.transport = NeverAnswering()
        configuration.minimumRetryDelay = .seconds(600)
        configuration.maximumRetryDelay = .seconds(900)
        let reporter = try SyncHealthReporter(configuration: configuration)
        reporter.record(.heartbeat)
        let flush = Task { try await reporter.flush() }
        try await Task.sleep(for: .milliseconds(100))
        flush.cancel()
        await #expect(throws: CancellationError.self) { try await flush.value }
        #expect(reporter.delivery.lastError == nil, "\(String(describing: reporter.delivery.lastError))")
        #expect(reporter.delivery.queuedEvents == 1, "the event stays queued")
        await reporter.shutdown()
        // The next launch sends at once: no backoff was set.
        let next = try SyncHealthReporter(configuration: testConfiguration(server, directory: directory))
        try await next.flush()
        #expect(server.deliveredIds.count == 1)
        await next.shutdown()
    }

    @Test("a reporter dropped without shutdown stops its platform observers")
    func discardedReporterStopsObservers() throws {
        let stopped = Locked(0)
        var reporter: SyncHealthReporter? = try SyncHealthReporter(configuration: testConfiguration(FakeServer()))
        reporter?.addStop { stopped.withLock { $0 += 1 } }
        reporter?.addStop { stopped.withLock { $0 += 1 } }
        reporter = nil
        #expect(stopped.withLock { $0 } == 2)
    }

    @Test("the status model shows the latest status whatever order the handler's calls reach the main queue in")
    @MainActor
    func statusOrder() async throws {
        let reporter = try SyncHealthReporter(configuration: testConfiguration(FakeServer()))
        let model = SyncHealthStatus(reporter: reporter)
        let stale = reporter.status
        let staleDelivery = reporter.delivery
        reporter.record(.account(status: .available))
        reporter.record(.network(available: true))
        reporter.record(.activity(phase: .setup, state: .failed, error: SyncErrorReport(domain: "CKErrorDomain", code: 5)))
        // A call made before the others, reaching the main queue after them.
        let handlers = reporter.shared.withLock { Array($0.handlers.values) }
        for handler in handlers { handler(stale, staleDelivery) }
        try await waitUntil { model.syncStateSummary == .error }
        try await Task.sleep(for: .milliseconds(50))
        #expect(model.status == reporter.status, "a stale call must not win")
        await reporter.shutdown()
    }
}

@Suite("Core Data observed from the start")
struct ObserveByDefaultTests {
    @Test("every container's events are observed from start by default, before any store loads; the opt-out observes none")
    func observedByDefault() async throws {
        for observes in [true, false] {
            let calls = Locked(0)
            var configuration = testConfiguration(FakeServer())
            configuration.observesPersistentCloudKitEvents = observes
            configuration.platform.observeAllPersistentCloudKitEvents = { _ in calls.withLock { $0 += 1 } }
            let reporter = try SyncHealthReporter(configuration: configuration)
            #expect(calls.withLock { $0 } == (observes ? 1 : 0))
            await reporter.shutdown()
        }
    }
}

@Suite("The platform a device reports")
struct PlatformNameTests {
    @Test("a Mac Catalyst app reports macCatalyst, not iOS (checked where it runs: the Catalyst job of apple.yml)")
    func platformName() {
        #if targetEnvironment(macCatalyst)
        #expect(DeviceIdentity.platform == "macCatalyst")
        #elseif os(iOS)
        #expect(DeviceIdentity.platform == "iOS")
        #elseif os(Linux)
        #expect(DeviceIdentity.platform == "Linux")
        #else
        #expect(!DeviceIdentity.platform.isEmpty)
        #endif
    }
}
