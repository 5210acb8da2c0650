import Crypto
import Foundation
import HTTPTypes
import Logging
import Metrics
import NIOCore
import NIOPosix
import SyncHealthAttest
import SyncHealthCore
import SyncHealthEngine
import SyncHealthStore
import Synchronization

/// App Attest at the service's door: issues challenges, verifies attestations, and checks each upload's assertion
/// against the device's stored key. The verification itself is `AppAttestVerifier`'s (pure); this type adds the
/// store (challenges, keys, counters) and the app's policy.
struct AppAttestGate: Sendable {
    let policy: AppAttestPolicy
    let verifier: AppAttestVerifier
    let store: any AttestationStore
    let clock: any ServiceClock
    /// Attested keys read before, by key id: a key's device and public key never change, so a signed upload reads the
    /// store only for the counter's move, which stays the arbiter of replays (a key replaced or erased on another
    /// replica fails there, and leaves this cache).
    let keys = AttestedKeyCache()
    /// Device tokens' secrets and revocations; `nil` where tokens are not offered (router tests that build a gate alone).
    var tokens: DeviceTokenKeys? = nil

    /// A verifier trusting Apple's App Attestation root, built once. The root is a constant of the source; were it
    /// unreadable, no root is trusted and every attestation is refused at the chain step.
    static let apple: AppAttestVerifier = (try? AppAttestVerifier.apple()) ?? AppAttestVerifier(roots: [])

    /// How long a challenge may be redeemed: Apple's sample uses minutes; attestation takes a second or two.
    static let challengeLifetime: Duration = .seconds(300)
    /// Expired challenges forgotten as each new one is issued: more than one, so the table shrinks after a burst.
    static let prunedPerChallenge = 16

    /// The app's settings; `409 attestation-not-configured` for an app that is not listed.
    func app(_ appId: String) throws(APIError) -> AppAttestApp {
        guard let app = policy.apps[appId] else { throw .attestationNotConfigured(appId: appId) }
        return app
    }

    /// A new one-time challenge for the app, kept in the store so that any replica redeems it.
    func issueChallenge(appId: String) async throws -> (challenge: [UInt8], expiresAt: Timestamp) {
        _ = try app(appId)
        var generator = SystemRandomNumberGenerator()
        let challenge = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let now = clock.now
        let expiresAt = now + Self.challengeLifetime
        try await storeCall {
            try await store.insertChallenge(challenge, appId: appId, expiresAt: expiresAt)
            // Each new challenge clears out a few expired ones: the table holds at most the last five minutes' worth.
            _ = try await store.pruneChallenges(before: now, limit: Self.prunedPerChallenge)
        }
        return (challenge, expiresAt)
    }

    /// Verifies an attestation and keeps the device's key. The challenge is used up first, so an attestation that
    /// fails later cannot be retried with it.
    func attest(
        device: DeviceKey,
        keyId: [UInt8],
        attestation: [UInt8],
        challenge: [UInt8],
        proof: Assertion? = nil
    ) async throws -> (record: DeviceAttestation, replaced: [UInt8]?) {
        let app = try app(device.appId)
        let now = clock.now
        guard try await storeCall({ try await store.consumeChallenge(challenge, appId: device.appId, now: now) }) else {
            throw APIError.attestation(.challenge("the challenge was not issued for this app by this service, has expired, or was used"))
        }
        let key: AttestedKey
        do {
            key = try await Self.verifyOffPool(
                verifier,
                attestation,
                keyId: keyId,
                clientDataHash: Array(SHA256.hash(data: challenge)),
                app: app,
                environments: policy.environments,
                now: Date(timeIntervalSince1970: Double(now.microseconds) / 1_000_000)
            )
        } catch {
            Self.failures(error).increment()
            if error == .busy {
                // Nothing was decided: the device may post the same attestation again with the same challenge.
                try await storeCall { try await store.insertChallenge(challenge, appId: device.appId, expiresAt: now + Self.challengeLifetime) }
            }
            throw APIError.attestation(error)
        }
        let record = DeviceAttestation(
            device: device,
            keyId: key.keyId,
            publicKey: key.publicKey,
            environment: key.environment.rawValue,
            receipt: key.receipt,
            attestedAt: now
        )
        // A device id stays bound to its key: a new key replaces it only with a proof from the current one, an
        // assertion over this challenge (the device's erasure frees the id too).
        var replacing: [UInt8]?
        if let proof {
            do {
                try await verify(device, appVersion: nil, proof, body: ByteBuffer(bytes: challenge), app: app)
            } catch let failure as AppAttestFailure {
                Self.failures(failure).increment()
                throw APIError.attestation(failure)
            }
            replacing = proof.keyId
        }
        let saved = try await storeCall { try await store.saveAttestation(record, replacing: replacing) }
        switch saved {
        case .saved(let replaced):
            keys.forget(device: device)
            if let replaced { tokens?.revoke(replaced, at: now) }
            return (record, replaced)
        case .unchanged:
            return (try await storeCall { try await store.attestation(of: device) } ?? record, nil)
        case .deviceBound:
            throw APIError.attestationDeviceBound(deviceId: device.deviceId)
        case .keyInUse:
            throw APIError.attestationKeyInUse
        }
    }

    /// Where attestations are verified: one thread of its own, so that certificate and signature checks (a few
    /// milliseconds each) never hold the concurrency pool, `/livez` included. The work of one is bounded
    /// (`AppAttestVerifier` checks two certificates directly); under a flood they queue here, and one that has
    /// waited longer than `verificationDeadline` is answered `503` unverified instead of adding to the queue's wait.
    static let verificationThread: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        return pool
    }()

    /// How long an attestation may wait for `verificationThread` before it is refused as busy.
    static let verificationDeadline: Duration = .seconds(2)

    static func verifyOffPool(
        _ verifier: AppAttestVerifier,
        _ attestation: [UInt8],
        keyId: [UInt8],
        clientDataHash: [UInt8],
        app: AppAttestApp,
        environments: Set<AppAttestEnvironment>,
        now: Date
    ) async throws(AppAttestFailure) -> AttestedKey {
        let deadline = ContinuousClock.now + verificationDeadline
        let result: Result<AttestedKey, AppAttestFailure>
        do {
            result = try await verificationThread.runIfActive {
                guard ContinuousClock.now < deadline else { return .failure(.busy) }
                return Result { () throws(AppAttestFailure) in
                    try verifier.verifyAttestation(
                        attestation,
                        keyId: keyId,
                        clientDataHash: clientDataHash,
                        app: app,
                        environments: environments,
                        now: now
                    )
                }
            }
        } catch {
            throw .busy
        }
        return try result.get()
    }

    /// The headers an attested upload carries.
    struct Assertion {
        var keyId: [UInt8]
        var assertion: [UInt8]
    }

    /// Checks an upload of `device` whose body, exactly as sent, is `body`. Returns whether it came from the
    /// device's attested key. Throws for an app in `require` mode when the assertion is missing or fails; in
    /// `report` mode a failed assertion only counts as unattested. Apps not listed pass unchecked.
    func check(_ device: DeviceKey, appVersion: String?, headers: HTTPFields, body: ByteBuffer) async throws -> Bool {
        guard let app = policy.apps[device.appId] else { return false }
        if let text = headers[Self.deviceTokenHeader], let tokens {
            switch try await storeCall({ try await tokens.check(Substring(text), device: device, now: clock.now) }) {
            case .success: return true
            case .failure(let failure):
                Self.tokenFailures(failure).increment()
                guard app.mode == .require else { return false }
                throw APIError.deviceToken(failure)
            }
        }
        do {
            let assertion = try Assertion(
                keyId: headers.first { $0.name.canonicalName == "synchealth-key-id" }?.value,
                assertion: headers.first { $0.name.canonicalName == "synchealth-assertion" }?.value
            )
            guard let assertion else { throw AppAttestFailure.required }
            try await verify(device, appVersion: appVersion, assertion, body: body, app: app)
            return true
        } catch let failure as AppAttestFailure {
            Self.failures(failure).increment()
            guard app.mode == .require else { return false }
            throw APIError.attestation(failure)
        }
    }

    private func verify(_ device: DeviceKey, appVersion: String?, _ assertion: Assertion, body: ByteBuffer, app: AppAttestApp) async throws {
        // A key is the device's own: an attested install signs for itself, not for ids it makes up.
        var stored = keys.key(assertion.keyId)
        if stored == nil {
            stored = try await storeCall { try await store.attestation(appId: device.appId, keyId: assertion.keyId) }
            if let stored { keys.keep(stored) }
        }
        guard let stored, stored.device == device else { throw AppAttestFailure.unknownKey }
        let counter = try body.withUnsafeReadableBytes { bytes throws(AppAttestFailure) in
            try AppAttestVerifier.verifyAssertion(
                assertion.assertion,
                clientData: bytes,
                publicKey: stored.publicKey,
                lastCounter: stored.counter,
                app: app
            )
        }
        // The counter moves before the batch is applied: of two requests with one assertion, on any replicas, one
        // wins. A batch that then fails to commit has cost its counter; the device signs its retry anew.
        guard
            try await storeCall({ try await store.advanceCounter(appId: device.appId, keyId: assertion.keyId, to: counter, appVersion: appVersion) })
        else {
            keys.forget(assertion.keyId)
            throw AppAttestFailure.replayed
        }
        keys.moved(assertion.keyId, to: counter)
    }

    static let deviceTokenHeader = HTTPField.Name("SyncHealth-Device-Token")!

    /// A device token for `device`'s attested key `keyId`: the device proves the key with an assertion over a fresh
    /// challenge (used up first, like an attestation's), and the token then stands for assertions until it expires.
    func issueToken(device: DeviceKey, keyId: [UInt8], challenge: [UInt8], assertion: [UInt8]) async throws -> (token: String, expiresAt: Timestamp) {
        let app = try app(device.appId)
        let now = clock.now
        guard try await storeCall({ try await store.consumeChallenge(challenge, appId: device.appId, now: now) }) else {
            throw APIError.attestation(.challenge("the challenge was not issued for this app by this service, has expired, or was used"))
        }
        do {
            try await verify(device, appVersion: nil, Assertion(keyId: keyId, assertion: assertion), body: ByteBuffer(bytes: challenge), app: app)
        } catch let failure as AppAttestFailure {
            Self.failures(failure).increment()
            throw APIError.attestation(failure)
        }
        var issued = tokens?.issue(device: device, keyId: keyId, now: now)
        if issued == nil, let tokens {
            // No secret read yet (the service has just started): read or make one now.
            try await storeCall { try await tokens.refresh(now: now) }
            issued = tokens.issue(device: device, keyId: keyId, now: now)
        }
        guard let issued else { throw APIError.unavailable("device tokens are not available yet") }
        return issued
    }

    /// `synchealth_device_token_failures_total{type}`: one series a problem type.
    static func tokenFailures(_ failure: DeviceTokenFailure) -> Counter {
        Counter(label: "synchealth_device_token_failures_total", dimensions: [("type", failure.slug)])
    }

    /// `synchealth_attestation_failures_total{type}`: one series a problem type, so bounded.
    static func failures(_ failure: AppAttestFailure) -> Counter {
        Counter(label: "synchealth_attestation_failures_total", dimensions: [("type", failure.problem(status: .unauthorized).type)])
    }
}

extension AppAttestGate.Assertion {
    /// Reads `SyncHealth-Key-Id` (the key's id) and `SyncHealth-Assertion` (the CBOR assertion over the body as
    /// sent), both standard base64; `nil` when neither is sent.
    init?(keyId: String?, assertion: String?) throws(AppAttestFailure) {
        guard keyId != nil || assertion != nil else { return nil }
        guard let keyId, let assertion, let key = Data(base64Encoded: keyId), let signed = Data(base64Encoded: assertion) else {
            throw .assertionMalformed("SyncHealth-Key-Id and SyncHealth-Assertion must both be base64")
        }
        self.init(keyId: Array(key), assertion: Array(signed))
    }
}

/// The attested keys a replica has read, by key id, with the last counter it saw move (a lower bound: the store's
/// conditional update decides). Bounded: when full it starts again empty, and keys are read again as they come.
final class AttestedKeyCache: Sendable {
    private let entries = Mutex<[[UInt8]: DeviceAttestation]>([:])
    static let capacity = 100_000

    func key(_ keyId: [UInt8]) -> DeviceAttestation? { entries.withLock { $0[keyId] } }

    func keep(_ attestation: DeviceAttestation) {
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            entries[attestation.keyId] = attestation
        }
    }

    func moved(_ keyId: [UInt8], to counter: UInt32) {
        entries.withLock { entries in
            if let last = entries[keyId]?.counter, last < counter { entries[keyId]?.counter = counter }
        }
    }

    func forget(_ keyId: [UInt8]) { _ = entries.withLock { $0.removeValue(forKey: keyId) } }

    /// Forgets a device's keys (a new attestation replaced them, or the device was erased here).
    func forget(device: DeviceKey) { entries.withLock { $0 = $0.filter { $0.value.device != device } } }
}
