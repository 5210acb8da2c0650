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
    /// The server refused an attestation in this process: no new key until the next launch.
    private var attestationRefusedThisLaunch = false
    /// No attempt to attest (or to get a token) before this: uploads go unsigned meanwhile.
    private var attestRetryAt: ContinuousClock.Instant?
    private var attestBackoff: Backoff
    private let clock = ContinuousClock()

    init(configuration: SyncHealthReporter.Configuration, shared: Locked<SyncHealthReporter.Shared>) {
        self.configuration = configuration
        self.shared = shared
        ingestKey = configuration.ingestKey
        backoff = Backoff(minimum: configuration.minimumRetryDelay, maximum: configuration.maximumRetryDelay)
        attestBackoff = Backoff(minimum: configuration.minimumRetryDelay, maximum: configuration.maximumRetryDelay)
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
        do {
            _ = try openQueue()
        } catch {
            throw SyncHealthReporterError.storageFailed(Self.describe(error))
        }
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
                case .attestationProblem(let type, let detail):
                    // Never a reason to drop the batch or stop sending: attest anew or refresh the token, sign anew.
                    attestationRefused(type: type)
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
        headers.merge(await attestationHeaders(body: body)) { $1 }
        do {
            let response = try await configuration.transport.post(body, to: configuration.eventsURL, headers: headers)
            return UploadOutcome(status: response.status, headers: response.headers, body: response.body, now: Date())
        } catch {
            return .retry(after: nil, reason: "\(error)")
        }
    }

    // MARK: App Attest

    /// The headers that sign `body`: a device token, else an assertion, else none. Attestation never costs a report:
    /// when it fails, the upload goes unsigned (the server's mode decides) and attestation is tried again later.
    private func attestationHeaders(body: Data) async -> [String: String] {
        guard let provider = configuration.appAttest.provider, !attestationOff else { return [:] }
        guard provider.isSupported, !Self.isAppExtension else {
            configuration.log("App Attest is not supported here: uploads are sent unsigned")
            attestationOff = true
            return [:]
        }
        let directory = configuration.resolvedStorageDirectory
        let due = attestRetryAt.map { $0 <= clock.now } ?? true
        var record: AttestedKeyRecord
        do {
            record = try AttestedKeyRecord.load(in: directory)
        } catch {
            // Unsigned this time; the key on disk is read again at the next send.
            configuration.log("App Attest: cannot read the key's record (\(Self.describe(error))); this upload is sent unsigned")
            return [:]
        }
        if !record.attested {
            guard due else { return [:] }
            do {
                try await attest(provider, record: &record, directory: directory)
            } catch {
                attestRetryAt = clock.now + attestBackoff.fail(using: &random)
                configuration.log("App Attest: \(error); uploads are sent unsigned meanwhile")
                return [:]
            }
            guard record.attested else { return [:] }
        }
        guard let keyId = record.keyId else { return [:] }
        if let token = record.validToken(now: Date()) { return ["SyncHealth-Device-Token": token] }
        if due {
            do {
                try await refreshToken(provider, keyId: keyId, record: &record, directory: directory)
                attestBackoff.succeed()
                attestRetryAt = nil
                if let token = record.validToken(now: Date()) { return ["SyncHealth-Device-Token": token] }
            } catch is AppAttestInvalidKey {
                keyLost(&record, directory: directory)
                return [:]
            } catch {
                attestRetryAt = clock.now + attestBackoff.fail(using: &random)
                // The server no longer knows the key: no assertion of it either; a new key is attested next time.
                guard record.keyId != nil else { return [:] }
                configuration.log("App Attest: no device token (\(error)); this upload carries an assertion")
            }
        }
        // No token: an assertion over this body, which the server accepts as well.
        do {
            let assertion = try await provider.generateAssertion(keyId, clientData: body)
            return ["SyncHealth-Key-Id": keyId, "SyncHealth-Assertion": assertion.base64EncodedString()]
        } catch is AppAttestInvalidKey {
            keyLost(&record, directory: directory)
            return [:]
        } catch {
            configuration.log("App Attest: no assertion (\(error)); this upload is sent unsigned")
            return [:]
        }
    }

    /// An app extension (other than watchOS, where extensions are how apps run): `generateKey` fails there whatever
    /// `isSupported` says.
    static var isAppExtension: Bool {
        #if os(watchOS)
        false
        #else
        Bundle.main.bundleURL.pathExtension == "appex"
        #endif
    }

    /// Attests the device's key, making one first when allowed (after a challenge: a server that does not attest
    /// this app costs no key). An attestation Apple made and the server did not acknowledge is posted again before
    /// anything else (`attestKey` cannot be called twice for one key); after `serverUnavailable` the same key and
    /// challenge are tried again. Throws when it did not succeed this time.
    private func attest(_ provider: any AppAttestProvider, record: inout AttestedKeyRecord, directory: URL) async throws {
        if record.attestation == nil {
            // Before a challenge is asked for: a key that may not be made ends the attempt here.
            if record.keyId == nil, !record.mayMakeKey(now: Date(), refusedThisLaunch: attestationRefusedThisLaunch) {
                throw AttestationFailed(
                    step: "a new key",
                    status: 0,
                    reason: "the server refused the last one; a new key waits for the next launch, one a day"
                )
            }
            let challenge: String
            if let kept = record.challenge, record.keyId != nil, (record.challengeExpiresAt ?? .distantPast) > Date() {
                challenge = kept
            } else {
                guard let issued = try await newChallenge() else { return }  // the server does not attest this app
                challenge = issued.text
                record.challenge = issued.text
                record.challengeExpiresAt = issued.expiresAt
            }
            if record.keyId == nil {
                do {
                    record.keyId = try await provider.generateKey()
                } catch let error as AppAttestUnsupported {
                    attestationOff = true
                    throw error
                }
                record.keyMadeAt = Date()
            }
            try record.save(in: directory)
            guard let keyId = record.keyId else { return }
            let attestation: Data
            do {
                attestation = try await provider.attestKey(keyId, clientData: Data(base64Encoded: challenge) ?? Data())
            } catch is AppAttestServerUnavailable {
                throw AttestationFailed(
                    step: "attestKey",
                    status: 0,
                    reason: "Apple's service is unavailable; the same key and challenge are tried later"
                )
            } catch let error as AppAttestUnsupported {
                attestationOff = true
                throw error
            } catch {
                // Any other failure of the platform: this key is spent, a new one is made next time.
                record.discardKey()
                try record.save(in: directory)
                throw error
            }
            record.attestation = attestation.base64EncodedString()
            try record.save(in: directory)
        }
        guard let keyId = record.keyId else { return }
        try await postAttestation(keyId: keyId, record: &record, directory: directory)
    }

    /// `POST /v1/attest` of the attestation kept in `record`.
    private func postAttestation(keyId: String, record: inout AttestedKeyRecord, directory: URL) async throws {
        guard let attestation = record.attestation, let challenge = record.challenge, let deviceId = device?.deviceId else { return }
        let body = try JSONEncoder().encode([
            "appId": configuration.appId, "deviceId": deviceId, "keyId": keyId, "attestation": attestation, "challenge": challenge,
        ])
        let answer = try await configuration.transport.post(body, to: configuration.attestURL, headers: apiHeaders)
        let type = UploadOutcome.problemType(answer.body) ?? ""
        switch answer.status {
        case 201:
            record.attested = true
            record.attestation = nil
            record.challenge = nil
            record.challengeExpiresAt = nil
            try record.save(in: directory)
            attestBackoff.succeed()
            attestRetryAt = nil
            configuration.log("App Attest: the device's key is attested")
        case 409 where type.hasSuffix("attestation-not-configured"):
            configuration.log("the server does not attest this app: uploads are sent unsigned")
            attestationOff = true
        case 409 where type.hasSuffix("attestation-device-bound"):
            // This device id was attested with a key this install no longer has: a new identity, and a new key for it.
            record.discardKey()
            try record.save(in: directory)
            try newIdentity(directory: directory)
            throw AttestationFailed(step: "attestation", status: 409, reason: "the device id is bound to a lost key")
        case 401 where type.hasSuffix("attestation-challenge"):
            // The challenge was used or has expired: by this very attestation, posted before with its answer lost, or
            // it waited too long. The key is tried as attested; the token's answer tells (`assertion-unknown-key`).
            record.attested = true
            record.attestation = nil
            record.challenge = nil
            record.challengeExpiresAt = nil
            try record.save(in: directory)
        case 409:
            // The key is another device's: spent, a new one next time.
            record.discardKey()
            try record.save(in: directory)
            throw AttestationFailed(step: "attestation", status: answer.status, reason: type)
        case 400, 401:
            // Refused (a wrong Team ID, a development key, the chain): this key is spent, and the next one waits.
            record.discardKey()
            record.refusedAt = Date()
            attestationRefusedThisLaunch = true
            try record.save(in: directory)
            throw AttestationFailed(step: "attestation", status: answer.status, reason: type)
        default:
            // No decision (503, a proxy, a timeout): the same attestation is posted again while its challenge lasts.
            if (record.challengeExpiresAt ?? .distantPast) <= Date() {
                record.discardKey()
                try record.save(in: directory)
            }
            throw AttestationFailed(step: "attestation", status: answer.status, reason: type)
        }
    }

    /// `POST /v1/attest/token`: an assertion of the key over a fresh challenge for a device token.
    private func refreshToken(_ provider: any AppAttestProvider, keyId: String, record: inout AttestedKeyRecord, directory: URL) async throws {
        guard let issued = try await newChallenge(), let deviceId = device?.deviceId else { return }
        let assertion = try await provider.generateAssertion(keyId, clientData: Data(base64Encoded: issued.text) ?? Data())
        let body = try JSONEncoder().encode([
            "appId": configuration.appId, "deviceId": deviceId, "keyId": keyId, "challenge": issued.text,
            "assertion": assertion.base64EncodedString(),
        ])
        let answer = try await configuration.transport.post(body, to: configuration.tokenURL, headers: apiHeaders)
        struct Token: Decodable {
            var token: String
            var expiresAt: String
        }
        switch answer.status {
        case 201:
            guard let token = try? JSONDecoder().decode(Token.self, from: answer.body), let expires = Self.date(rfc3339: token.expiresAt)
            else { throw AttestationFailed(step: "token", status: 201, reason: "an answer without a token") }
            record.token = token.token
            record.tokenExpiresAt = expires
            try record.save(in: directory)
        case 401 where UploadOutcome.problemType(answer.body)?.hasSuffix("assertion-unknown-key") == true:
            // The server no longer knows the key (the device was erased there): attest a new one.
            record.discardKey()
            try record.save(in: directory)
            throw AttestationFailed(step: "token", status: 401, reason: "the server no longer knows the key")
        default:
            throw AttestationFailed(step: "token", status: answer.status, reason: UploadOutcome.problemType(answer.body) ?? "")
        }
    }

    /// A challenge from the server, and when it expires; `nil` when the server does not attest this app (`409`).
    private func newChallenge() async throws -> (text: String, expiresAt: Date)? {
        let body = try JSONEncoder().encode(["appId": configuration.appId])
        let issued = try await configuration.transport.post(body, to: configuration.challengeURL, headers: apiHeaders)
        if issued.status == 409 {
            configuration.log("the server does not attest this app: uploads are sent unsigned")
            attestationOff = true
            return nil
        }
        struct Challenge: Decodable {
            var challenge: String
            var expiresAt: String?
        }
        guard issued.status == 201, let challenge = try? JSONDecoder().decode(Challenge.self, from: issued.body),
            Data(base64Encoded: challenge.challenge) != nil
        else { throw AttestationFailed(step: "challenge", status: issued.status, reason: UploadOutcome.problemType(issued.body) ?? "") }
        let expires = challenge.expiresAt.flatMap(Self.date(rfc3339:)) ?? Date().addingTimeInterval(240)
        return (challenge.challenge, expires)
    }

    /// An answer naming an App Attest problem (`assertion-…`, `attestation-…`, `token-…`): what it asks of the device.
    private func attestationRefused(type: String) {
        let directory = configuration.resolvedStorageDirectory
        guard var record = try? AttestedKeyRecord.load(in: directory) else { return }
        if type.contains(":token-") {
            record.token = nil
            record.tokenExpiresAt = nil
        } else if type.hasSuffix("assertion-unknown-key") {
            // The server no longer knows the key (the device was erased there): a new key, under the same id.
            record.discardKey()
        }
        try? record.save(in: directory)
        // Attest or refresh at the next send, not after the backoff of failed attestations.
        attestRetryAt = nil
    }

    /// The platform no longer knows the device's attested key. The server binds the device id to that key, so a
    /// generated id is replaced with a new one, which the next key attests; a configured id cannot be, and stays
    /// unsigned for this process.
    private func keyLost(_ record: inout AttestedKeyRecord, directory: URL) {
        let wasAttested = record.attested
        record.discardKey()
        try? record.save(in: directory)
        guard wasAttested else { return }
        do {
            try newIdentity(directory: directory)
        } catch {
            configuration.log("App Attest: the key is lost and the device id \(error); uploads are sent unsigned")
            attestationOff = true
        }
    }

    /// A new random device id: the one stored is bound on the server to a key this install has lost.
    private func newIdentity(directory: URL) throws {
        guard configuration.deviceId == nil, let current = device else {
            attestationOff = true
            throw AttestationFailed(step: "identity", status: 0, reason: "is configured, so it cannot be replaced")
        }
        try? FileManager.default.removeItem(at: directory.appendingPathComponent(DeviceIdentity.fileName))
        let fresh = try DeviceIdentity.load(in: directory)
        device = DeviceDescription(
            deviceId: fresh,
            appId: current.appId,
            containerId: current.containerId,
            platform: current.platform,
            osVersion: current.osVersion,
            appVersion: current.appVersion
        )
        configuration.log("App Attest: the device's key was lost; it reports under a new device id")
    }

    /// An RFC 3339 time as the server writes it, with or without fractional seconds.
    static func date(rfc3339 text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }

    /// The headers of the App Attest endpoints.
    private var apiHeaders: [String: String] {
        [
            "Content-Type": "application/json", "Authorization": "Bearer \(ingestKey)", "X-SyncHealth-Key": ingestKey,
            "User-Agent": "SyncHealthClient/1",
        ]
    }

    private struct AttestationFailed: Error, CustomStringConvertible {
        var step: String
        var status: Int
        var reason: String
        var description: String { status == 0 ? "\(step): \(reason)" : "the server answered \(status) to the \(step) \(reason)" }
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
        try StorageFiles.makeDirectory(directory)
        StorageFiles.protectExisting(
            ([directory]
                + (EventQueue.fileNames + [InboxLog.fileName, DeviceIdentity.fileName, AttestedKeyRecord.fileName]).map(
                    directory.appendingPathComponent
                ))
        )
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
    /// the inbox log's lines that neither the queue nor this process's inbox holds. A line at or below the queue's
    /// last id was moved already (its process could not rewrite the log after the move: a full disk) and may have
    /// been acknowledged since: it is dropped, never sent again under a new id. Every process's ids start above
    /// what is stored (`EventQueue.lastStoredId`), so no new event has such an id.
    private func recoverInboxLog(into queue: EventQueue, directory: URL) throws {
        let logged = InboxLog.read(directory: directory)
        guard !logged.isEmpty else { return }
        var known = Set(queue.pending.map(\.id))
        shared.withLock { s in for event in s.inbox { known.insert(event.eventId) } }
        var recovered: [EventQueue.Entry] = []
        var last = queue.lastId
        var moved = 0
        for entry in logged where !known.contains(entry.id) {
            if let previous = last, entry.id <= previous {
                moved += 1
                continue
            }
            last = entry.id
            recovered.append(entry)
        }
        if moved > 0 { configuration.log("skipped \(moved) inbox line(s) the queue took before the last exit") }
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
