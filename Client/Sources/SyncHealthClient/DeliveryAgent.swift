import Foundation

/// Owns the on-disk queue and sends it, one request at a time: a flush racing the scheduled send or a background
/// transition waits for the send under way, so nothing is sent or removed twice.
actor DeliveryAgent {
    private let configuration: SyncHealthReporter.Configuration
    private let shared: Locked<SyncHealthReporter.Shared>
    private var ingestKey: String
    private var queue: EventQueue?
    private var device: DeviceDescription?
    private var backoff: Backoff
    /// No scheduled send before this (backoff or the server's `Retry-After`).
    private var retryAt: ContinuousClock.Instant?
    /// Whether `retryAt` is the server's own request (`429`/`503` with `Retry-After`): a flush honours it too.
    private var serverAskedToWait = false
    private var lastAttempt: ContinuousClock.Instant?
    /// Set by `401`/`403`: nothing is sent until the key changes.
    private var refusal: SyncHealthReporterError?
    private var sending = false
    private var sendWaiters: [CheckedContinuation<Void, Never>] = []
    private var random = SystemRandomNumberGenerator()
    /// App Attest is off for this process: the device cannot attest, or the server does not attest this app.
    private var attestationOff = false
    private let clock = ContinuousClock()

    init(configuration: SyncHealthReporter.Configuration, shared: Locked<SyncHealthReporter.Shared>) {
        self.configuration = configuration
        self.shared = shared
        ingestKey = configuration.ingestKey
        backoff = Backoff(minimum: configuration.minimumRetryDelay, maximum: configuration.maximumRetryDelay)
        // The first scheduled send waits a whole interval too, so that what an app records at launch (account,
        // network, setup, import) goes out in one request.
        lastAttempt = clock.now
    }

    // MARK: The loop

    /// Sends on schedule until cancelled: when events wait, at most every `sendInterval`, later after failures;
    /// with an empty queue it sleeps until the next `record` (an idle app is never woken).
    func run(wakes: AsyncStream<Void>) async {
        var iterator = wakes.makeAsyncIterator()
        while !Task.isCancelled {
            do {
                try persistInboxOrThrow()
            } catch {
                note(.storageFailed(Self.describe(error)))
            }
            if let due = nextSend() {
                if due > clock.now {
                    do { try await clock.sleep(until: due) } catch { return }
                    continue
                }
                _ = try? await sendAll(flushing: false)
                continue
            }
            guard await iterator.next() != nil else { return }
        }
    }

    /// When the next scheduled send is due; `nil` when there is nothing to send or sending is stopped.
    private func nextSend() -> ContinuousClock.Instant? {
        guard let queue, !queue.isEmpty, refusal == nil else { return nil }
        let now = clock.now
        var due = lastAttempt.map { $0 + configuration.sendInterval } ?? now
        if let retryAt { due = max(due, retryAt) }
        return due
    }

    // MARK: Flush

    func flush() async throws {
        try await sendAll(flushing: true)
    }

    func updateIngestKey(_ key: String) {
        ingestKey = key
        refusal = nil
        retryAt = nil
        serverAskedToWait = false
        backoff.succeed()
        shared.withLock { $0.delivery.lastError = nil }
    }

    func deviceId() throws -> String {
        _ = try openQueue()
        return device?.deviceId ?? ""
    }

    /// Deletes what the reporter keeps on the device: the queue (events not yet sent), the acknowledged mark and
    /// the stored device id, and the events recorded but not yet written. Waits for a send under way. The next
    /// event opens a new queue, with a new random device id (a configured `deviceId` stays).
    func erase() async throws {
        await acquireSending()
        defer { releaseSending() }
        let directory = configuration.resolvedStorageDirectory
        queue = nil
        device = nil
        shared.withLock { s in
            s.inbox.removeAll()
            s.inboxLog?.close()
        }
        for name in EventQueue.fileNames + [InboxLog.fileName, DeviceIdentity.fileName, AttestedKeyRecord.fileName] {
            let url = directory.appendingPathComponent(name)
            guard FileManager.default.fileExists(atPath: url.path) else { continue }
            do {
                try FileManager.default.removeItem(at: url)
            } catch {
                throw SyncHealthReporterError.storageFailed(Self.describe(error))
            }
        }
        retryAt = nil
        serverAskedToWait = false
        backoff.succeed()
        update { d in
            d.queuedEvents = 0
            d.lastError = nil
        }
    }

    /// Writes recorded events to the queue (at shutdown, so that nothing recorded is lost).
    func persistInbox() {
        do { try persistInboxOrThrow() } catch { note(.storageFailed(Self.describe(error))) }
    }

    // MARK: Sending

    /// Sends the queue, batch after batch, until it is empty or a send fails.
    private func sendAll(flushing: Bool) async throws {
        await acquireSending()
        defer { releaseSending() }
        do {
            try persistInboxOrThrow()
        } catch {
            let failure = SyncHealthReporterError.storageFailed(Self.describe(error))
            note(failure)
            throw failure
        }
        guard let queue, let device else { return }
        if let refusal { throw refusal }
        if let retryAt, retryAt > clock.now, !flushing || serverAskedToWait {
            if flushing { throw SyncHealthReporterError.rateLimited(retryAfter: retryAt - clock.now) }
            return
        }
        guard !queue.isEmpty else { return }
        do { try queue.synchronize() } catch { note(.storageFailed(Self.describe(error))) }
        var size = configuration.batchSize
        while !queue.isEmpty {
            let batch = Array(queue.pending.prefix(size))
            lastAttempt = clock.now
            let outcome = await upload(batch, device: device)
            // Cancelled (the background time expired, the app is being suspended): not the server's failure. The
            // batch stays queued, with no backoff and no error to show; the next launch or send goes on.
            if Task.isCancelled, case .retry = outcome { throw CancellationError() }
            do {
                switch outcome {
                case .delivered(let accepted, let duplicates, let rejected):
                    for r in rejected { configuration.log("the server rejected event \(batch[safe: r.index]?.id ?? "?"): \(r.detail)") }
                    try queue.acknowledge(batch.count)
                    backoff.succeed()
                    retryAt = nil
                    serverAskedToWait = false
                    update { d in
                        d.deliveredEvents += accepted + duplicates
                        d.rejectedEvents += rejected.count
                        d.lastError = nil
                    }
                case .tooLarge:
                    if batch.count == 1 {
                        configuration.log("dropped event \(batch[0].id): larger than the server accepts")
                        try queue.acknowledge(1)
                        update { $0.rejectedEvents += 1 }
                    } else {
                        size = max(1, batch.count / 2)
                    }
                case .invalid(let detail):
                    // The envelope itself (app or device id) is wrong: the same batch can never succeed.
                    configuration.log("dropped \(batch.count) event(s): the server found the batch invalid: \(detail)")
                    try queue.acknowledge(batch.count)
                    update { d in
                        d.rejectedEvents += batch.count
                        d.lastError = .deliveryFailed("invalid batch: \(detail)")
                    }
                case .assertionRefused(let type, let detail):
                    // The server no longer knows the key (the device was erased there): attest a new one.
                    if type.hasSuffix("assertion-unknown-key") { AttestedKeyRecord.remove(in: configuration.resolvedStorageDirectory) }
                    retryAt = clock.now + backoff.fail(using: &random)
                    let error = SyncHealthReporterError.deliveryFailed("App Attest: \(detail)")
                    note(error)
                    throw error
                case .refused(let status, let detail):
                    let error = SyncHealthReporterError.refused(status: status, detail: detail)
                    refusal = error
                    configuration.log("sending stopped: \(error)")
                    note(error)
                    throw error
                case .retry(let after, let reason):
                    // The server's wait, never longer than the configuration allows.
                    let after = after.map { min($0, configuration.maximumRetryDelay) }
                    let delay = min(after ?? backoff.fail(using: &random), configuration.maximumRetryDelay)
                    serverAskedToWait = after != nil
                    if after != nil { _ = backoff.fail(using: &random) }
                    retryAt = clock.now + delay
                    let error: SyncHealthReporterError = after.map { .rateLimited(retryAfter: $0) } ?? .deliveryFailed(reason)
                    note(error)
                    throw error
                }
            } catch let error as SyncHealthReporterError {
                throw error
            } catch {
                let failure = SyncHealthReporterError.storageFailed(Self.describe(error))
                note(failure)
                throw failure
            }
            update { $0.queuedEvents = queue.count }
        }
    }

    /// Posts one batch; a failure to get an answer is a retry.
    private func upload(_ batch: [EventQueue.Entry], device: DeviceDescription) async -> UploadOutcome {
        var body = Data(EventJSON.batch(device: device, events: batch.lazy.map(\.json)).utf8)
        // The key in `X-SyncHealth-Key` too: `Authorization` is a header Apple's URL Loading System reserves.
        var headers = [
            "Content-Type": "application/json", "Authorization": "Bearer \(ingestKey)", "X-SyncHealth-Key": ingestKey,
            "User-Agent": "SyncHealthClient/1",
        ]
        if body.count > configuration.compressAbove, let gzipped = try? Gzip.compress(body) {
            body = gzipped
            headers["Content-Encoding"] = "gzip"
        }
        // Signed last: the assertion covers the body exactly as sent.
        switch await attestationHeaders(body: body) {
        case .headers(let signed): headers.merge(signed) { $1 }
        case .failed(let outcome): return outcome
        }
        do {
            let response = try await configuration.transport.post(body, to: configuration.eventsURL, headers: headers)
            return UploadOutcome(status: response.status, headers: response.headers, body: response.body, now: Date())
        } catch {
            return .retry(after: nil, reason: "\(error)")
        }
    }

    // MARK: App Attest

    /// The headers that sign `body`: none when App Attest is off; attests the key first when it is not yet. A failure
    /// keeps the batch queued and backs off, as any failed send does.
    private func attestationHeaders(body: Data) async -> Signing {
        guard let provider = configuration.appAttest.provider, !attestationOff else { return .headers([:]) }
        guard provider.isSupported else {
            configuration.log("App Attest is not supported on this device: uploads are sent unsigned")
            attestationOff = true
            return .headers([:])
        }
        let directory = configuration.resolvedStorageDirectory
        do {
            guard let keyId = try await attestedKey(provider, directory: directory) else {
                configuration.log("the server does not attest this app: uploads are sent unsigned")
                attestationOff = true
                return .headers([:])
            }
            let assertion = try await provider.generateAssertion(keyId, clientData: body)
            return .headers(["SyncHealth-Key-Id": keyId, "SyncHealth-Assertion": assertion.base64EncodedString()])
        } catch is AppAttestInvalidKey {
            AttestedKeyRecord.remove(in: directory)
            return .failed(.retry(after: nil, reason: "App Attest: the key is no longer valid; a new one is made"))
        } catch {
            return .failed(.retry(after: nil, reason: "App Attest: \(error)"))
        }
    }

    /// The id of the device's attested key, attesting it first if needed; `nil` when the server does not attest this
    /// app (`409`). A key made but not yet attested is kept and attested again after a failure (Apple throttles new
    /// keys; an attestation that failed in transit may be retried with the same key).
    private func attestedKey(_ provider: any AppAttestProvider, directory: URL) async throws -> String? {
        var record = AttestedKeyRecord.load(in: directory)
        if let record, record.attested { return record.keyId }
        let keyId: String
        if let known = record?.keyId {
            keyId = known
        } else {
            keyId = try await provider.generateKey()
            record = AttestedKeyRecord(keyId: keyId, attested: false)
            try record?.save(in: directory)
        }
        let headers = [
            "Content-Type": "application/json", "Authorization": "Bearer \(ingestKey)", "X-SyncHealth-Key": ingestKey,
            "User-Agent": "SyncHealthClient/1",
        ]
        let challengeBody = try JSONEncoder().encode(["appId": configuration.appId])
        let issued = try await configuration.transport.post(challengeBody, to: configuration.challengeURL, headers: headers)
        if issued.status == 409 { return nil }
        struct Challenge: Decodable { var challenge: String }
        guard issued.status == 201, let text = try? JSONDecoder().decode(Challenge.self, from: issued.body).challenge,
            let challenge = Data(base64Encoded: text)
        else { throw AttestationFailed(step: "challenge", status: issued.status) }
        let attestation = try await provider.attestKey(keyId, clientData: challenge)
        let attestBody = try JSONEncoder().encode([
            "appId": configuration.appId, "deviceId": device?.deviceId ?? "", "keyId": keyId,
            "attestation": attestation.base64EncodedString(), "challenge": text,
        ])
        let attested = try await configuration.transport.post(attestBody, to: configuration.attestURL, headers: headers)
        switch attested.status {
        case 201:
            try AttestedKeyRecord(keyId: keyId, attested: true).save(in: directory)
            configuration.log("App Attest: the device's key is attested")
            return keyId
        case 409:
            return nil
        case 401:
            // The server refused this key's attestation: a new key next time, not the same refusal again.
            AttestedKeyRecord.remove(in: directory)
            throw AttestationFailed(step: "attestation", status: 401)
        default:
            throw AttestationFailed(step: "attestation", status: attested.status)
        }
    }

    /// An upload's signature headers, or why the upload cannot be sent now.
    private enum Signing {
        case headers([String: String])
        case failed(UploadOutcome)
    }

    private struct AttestationFailed: Error, CustomStringConvertible {
        var step: String
        var status: Int
        var description: String { "the server answered \(status) to the \(step)" }
    }

    private func acquireSending() async {
        while sending { await withCheckedContinuation { sendWaiters.append($0) } }
        sending = true
    }

    private func releaseSending() {
        sending = false
        if !sendWaiters.isEmpty { sendWaiters.removeFirst().resume() }
    }

    // MARK: The queue

    private func openQueue() throws -> EventQueue {
        if let queue { return queue }
        let directory = configuration.resolvedStorageDirectory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Before the device id is written: a backup must never carry it to another device.
        do {
            try configuration.platform.excludeFromBackup(directory)
        } catch {
            configuration.log("could not exclude the queue from backups: \(error)")
        }
        let opened = try EventQueue(
            directory: directory,
            limits: .init(maxEvents: configuration.maxQueuedEvents, maxBytes: configuration.maxQueuedBytes),
            beforeWrite: configuration.platform.beforeQueueWrite
        )
        let deviceId = try configuration.deviceId ?? DeviceIdentity.load(in: directory)
        device = DeviceDescription(
            deviceId: deviceId,
            appId: configuration.appId,
            containerId: configuration.containerId,
            platform: DeviceIdentity.platform,
            osVersion: DeviceIdentity.osVersion,
            appVersion: configuration.appVersion
        )
        try recoverInboxLog(into: opened, directory: directory)
        queue = opened
        update { $0.queuedEvents = opened.count }
        return opened
    }

    /// Moves into the queue the events an earlier process recorded and did not get to move (it was killed first):
    /// the inbox log's lines that neither the queue nor this process's inbox holds. An id not above the queue's
    /// last one takes a new id (the wall clock stepped back), as in `persistInboxOrThrow`.
    private func recoverInboxLog(into queue: EventQueue, directory: URL) throws {
        let logged = InboxLog.read(directory: directory)
        guard !logged.isEmpty else { return }
        var known = Set(queue.pending.map(\.id))
        shared.withLock { s in for event in s.inbox { known.insert(event.eventId) } }
        var ids = EventIdGenerator(after: queue.lastId)
        var recovered: [EventQueue.Entry] = []
        var last = queue.lastId
        for entry in logged where !known.contains(entry.id) {
            var entry = entry
            if let previous = last, entry.id <= previous {
                let id = ids.next(unixMillis: 0)
                let prefix = #"{"eventId":"\#(entry.id)""#
                guard entry.json.hasPrefix(prefix) else { continue }
                entry = EventQueue.Entry(id: id, json: #"{"eventId":"\#(id)""# + entry.json.dropFirst(prefix.count))
            }
            last = entry.id
            recovered.append(entry)
        }
        if !recovered.isEmpty {
            let dropped = try queue.append(recovered)
            configuration.log("recovered \(recovered.count) event(s) recorded before the last exit")
            if dropped > 0 { update { $0.droppedEvents += dropped } }
            // Events recorded in this process come after these: their ids must too.
            shared.withLock { s in
                if let lastId = queue.lastId, let first = s.inbox.first, first.eventId <= lastId {
                    s.ids = EventIdGenerator(after: lastId)
                    for i in s.inbox.indices { s.inbox[i].eventId = s.ids.next(unixMillis: 0) }
                }
            }
        }
        try shared.withLock { s in try s.inboxLog?.replace(with: s.inbox.map { EventQueue.Entry(id: $0.eventId, json: EventJSON.encode($0)) }) }
    }

    /// Moves recorded events from the inbox to the disk queue. They leave the inbox only once the append
    /// succeeded; while the disk refuses them they wait there, the oldest dropped beyond `maxQueuedEvents`.
    private func persistInboxOrThrow() throws {
        let queue: EventQueue
        do {
            queue = try openQueue()
        } catch {
            boundInbox()
            throw error
        }
        let recorded = shared.withLock { s -> [DeviceEvent] in
            // An id not above the queue's last one (the wall clock stepped back since an earlier launch): the
            // event was never sent, so it can take a new id.
            if let last = queue.lastId, let first = s.inbox.first, first.eventId <= last {
                s.ids = EventIdGenerator(after: last)
                for i in s.inbox.indices { s.inbox[i].eventId = s.ids.next(unixMillis: 0) }
            }
            return s.inbox
        }
        guard !recorded.isEmpty else { return }
        let dropped: Int
        do {
            dropped = try queue.append(recorded.map { EventQueue.Entry(id: $0.eventId, json: EventJSON.encode($0)) })
        } catch {
            boundInbox()
            throw error
        }
        // Only this actor removes from the inbox, and `record` only appends: the first `recorded.count` are these.
        // The log keeps what `record` added meanwhile, under the same lock, so that no line is lost or left over.
        shared.withLock { s in
            s.inbox.removeFirst(min(recorded.count, s.inbox.count))
            do {
                try s.inboxLog?.replace(with: s.inbox.map { EventQueue.Entry(id: $0.eventId, json: EventJSON.encode($0)) })
            } catch {
                // The queue holds these events; a line left in the log is skipped as known on the next start.
                configuration.log("could not rewrite the inbox log: \(error)")
            }
        }
        if dropped > 0 { configuration.log("the queue is full: dropped the \(dropped) oldest event(s)") }
        update { d in
            d.queuedEvents = queue.count
            d.droppedEvents += dropped
        }
    }

    /// Keeps the inbox within the queue's event limit while the disk cannot take it, dropping the oldest.
    private func boundInbox() {
        let dropped = shared.withLock { s -> Int in
            let excess = s.inbox.count - configuration.maxQueuedEvents
            guard excess > 0 else { return 0 }
            s.inbox.removeFirst(excess)
            return excess
        }
        if dropped > 0 { update { $0.droppedEvents += dropped } }
    }

    /// Changes the delivery status, and tells the status handlers when it changed.
    private func update(_ body: (inout DeliveryStatus) -> Void) {
        let calls = shared.withLock { s -> [() -> Void] in
            let before = s.delivery
            body(&s.delivery)
            return s.delivery == before ? [] : s.handlerCalls
        }
        for call in calls { call() }
    }

    /// Shows `error` in the status, and logs it when it is not the one already shown (a storage failure is
    /// retried at every send, and would otherwise fill the log).
    private func note(_ error: SyncHealthReporterError) {
        let isNew = shared.withLock { $0.delivery.lastError != error }
        if isNew { configuration.log("\(error)") }
        update { $0.lastError = error }
    }
}

extension DeliveryAgent {
    /// A storage error in words that stay the same from one failure to the next (an `NSError`'s own description
    /// lists its user info in no fixed order): its domain and code, the POSIX error under it, and the path.
    static func describe(_ error: any Error) -> String {
        let error = error as NSError
        var text = "\(error.domain) \(error.code)"
        if let underlying = error.userInfo[NSUnderlyingErrorKey] as? NSError {
            text += " (\(underlying.domain) \(underlying.code): \(underlying.localizedDescription))"
        }
        if let path = error.userInfo[NSFilePathErrorKey] as? String { text += " at \(path)" }
        return text
    }
}

extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
