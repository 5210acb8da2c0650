import SyncHealthCore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthStore

@Suite("Store conformance: App Attest's challenges and attested keys")
struct AttestationStoreConformanceTests {
    let device = DeviceKey(appId: "com.a", deviceId: "d1")

    func attestation(_ device: DeviceKey, key: UInt8, counter: UInt32 = 0, environment: String = "production") -> DeviceAttestation {
        DeviceAttestation(
            device: device,
            keyId: Array(repeating: key, count: 32),
            publicKey: [4] + Array(repeating: key, count: 64),
            environment: environment,
            receipt: [1, 2, 3],
            counter: counter,
            attestedAt: t0 + .seconds(Int64(key))
        )
    }

    @Test("a challenge is redeemed once, only for its app, only before it expires; expired ones are pruned", arguments: StoreKind.allCases)
    func challenges(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let a = Array(repeating: UInt8(1), count: 32)
            let b = Array(repeating: UInt8(2), count: 32)
            let c = Array(repeating: UInt8(3), count: 32)
            try await store.insertChallenge(a, appId: "com.a", expiresAt: t0 + .seconds(300))
            try await store.insertChallenge(b, appId: "com.a", expiresAt: t0 + .seconds(300))
            try await store.insertChallenge(c, appId: "com.a", expiresAt: t0 + .seconds(10))
            #expect(try await store.consumeChallenge(a, appId: "com.b", now: t0) == false, "another app's")
            #expect(try await store.consumeChallenge(a, appId: "com.a", now: t0) == false, "gone after the first try, whatever it said")
            #expect(try await store.consumeChallenge(b, appId: "com.a", now: t0 + .seconds(300)) == false, "expired")
            #expect(try await store.pruneChallenges(before: t0 + .seconds(11), limit: 10) == 1)
            #expect(try await store.consumeChallenge(c, appId: "com.a", now: t0) == false, "pruned")
            try await store.insertChallenge(a, appId: "com.a", expiresAt: t0 + .seconds(300))
            #expect(try await store.consumeChallenge(a, appId: "com.a", now: t0 + .seconds(299)))
            #expect(try await store.consumeChallenge(a, appId: "com.a", now: t0 + .seconds(1)) == false, "used")
        }
    }

    @Test("a device keeps one key; counters only move forward, once each; counts are by environment", arguments: StoreKind.allCases)
    func keys(kind: StoreKind) async throws {
        try await kind.withStore { store in
            #expect(try await store.saveAttestation(attestation(device, key: 1), replacing: nil) == .saved(replaced: nil))
            _ = try await store.saveAttestation(
                attestation(DeviceKey(appId: "com.a", deviceId: "d2"), key: 2, environment: "development"),
                replacing: nil
            )
            _ = try await store.saveAttestation(attestation(DeviceKey(appId: "com.b", deviceId: "d1"), key: 3), replacing: nil)
            #expect(try await store.attestation(appId: "com.a", keyId: Array(repeating: 1, count: 32)) == attestation(device, key: 1))
            #expect(try await store.attestation(appId: "com.b", keyId: Array(repeating: 1, count: 32)) == nil, "another app's key")
            #expect(try await store.attestation(of: device)?.keyId == Array(repeating: 1, count: 32))
            let page = try await store.attestations(of: [
                device, DeviceKey(appId: "com.b", deviceId: "d1"), DeviceKey(appId: "com.b", deviceId: "d9"),
            ])
            #expect(page.keys.sorted { $0.appId < $1.appId } == [device, DeviceKey(appId: "com.b", deviceId: "d1")], "only devices with a key")
            #expect(try await store.attestations(of: []).isEmpty)

            #expect(try await store.advanceCounter(appId: "com.a", keyId: Array(repeating: 1, count: 32), to: 1, appVersion: "1.0"))
            #expect(
                try await store.advanceCounter(appId: "com.a", keyId: Array(repeating: 1, count: 32), to: 1, appVersion: "1.0") == false,
                "a replay"
            )
            #expect(try await store.advanceCounter(appId: "com.a", keyId: Array(repeating: 1, count: 32), to: 5, appVersion: "1.1"))
            #expect(
                try await store.advanceCounter(appId: "com.a", keyId: Array(repeating: 1, count: 32), to: 3, appVersion: "0.9") == false,
                "backwards"
            )
            #expect(
                try await store.advanceCounter(appId: "com.b", keyId: Array(repeating: 1, count: 32), to: 9, appVersion: nil) == false,
                "another app"
            )
            #expect(try await store.attestation(of: device)?.counter == 5)
            #expect(
                try await store.attestedDevicesByAppVersion(appId: "com.a") == ["1.1": 1, "": 1],
                "the last signed upload's version; none yet is \"\""
            )

            #expect(try await store.attestedDevices(appId: "com.a") == ["production": 1, "development": 1])
            #expect(try await store.attestedDevices(appId: nil) == ["production": 2, "development": 1])

            // The same key again for the same device keeps its row: its counter does not go back (no replays).
            #expect(try await store.saveAttestation(attestation(device, key: 1), replacing: nil) == .unchanged)
            #expect(try await store.attestation(of: device)?.counter == 5)
            // A device id stays bound to its key: another key without naming the current one, or naming another, is refused.
            #expect(
                try await store.saveAttestation(attestation(device, key: 4), replacing: nil) == .deviceBound(keyId: Array(repeating: 1, count: 32))
            )
            #expect(
                try await store.saveAttestation(attestation(device, key: 4), replacing: Array(repeating: 2, count: 32))
                    == .deviceBound(keyId: Array(repeating: 1, count: 32))
            )
            // One key attests one device id: another device's key is refused, and that device keeps it.
            #expect(try await store.saveAttestation(attestation(DeviceKey(appId: "com.a", deviceId: "d9"), key: 2), replacing: nil) == .keyInUse)
            #expect(try await store.attestation(of: DeviceKey(appId: "com.a", deviceId: "d2"))?.keyId == Array(repeating: 2, count: 32))
            #expect(try await store.attestation(of: DeviceKey(appId: "com.a", deviceId: "d9")) == nil)
            // Naming the current key replaces it.
            #expect(
                try await store.saveAttestation(attestation(device, key: 4), replacing: Array(repeating: 1, count: 32))
                    == .saved(replaced: Array(repeating: 1, count: 32))
            )
            #expect(try await store.attestation(appId: "com.a", keyId: Array(repeating: 1, count: 32)) == nil)
            #expect(try await store.attestation(of: device)?.counter == 0)
            #expect(try await store.attestedDevices(appId: "com.a") == ["production": 1, "development": 1])

            try await store.deleteAttestation(of: device, at: t0 + .seconds(7))
            #expect(try await store.attestation(of: device) == nil)
            #expect(try await store.attestedDevices(appId: "com.a") == ["development": 1])
        }
    }

    @Test(
        "a replaced key and an erased device's key are revoked in the same write, in order; secrets are kept and forgotten",
        arguments: StoreKind.allCases
    )
    func revocationsAndSecrets(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let other = DeviceKey(appId: "com.a", deviceId: "d2")
            _ = try await store.saveAttestation(attestation(device, key: 1), replacing: nil)
            _ = try await store.saveAttestation(attestation(other, key: 2), replacing: nil)
            #expect(try await store.attestationRevocations(after: 0, limit: 10).isEmpty, "a first attestation revokes nothing")
            var replacement = attestation(device, key: 3)
            replacement.attestedAt = t0 + .seconds(5)
            _ = try await store.saveAttestation(replacement, replacing: Array(repeating: 1, count: 32))
            _ = try await store.saveAttestation(attestation(device, key: 4), replacing: nil)  // refused: revokes nothing
            try await store.deleteAttestation(of: other, at: t0 + .seconds(9))
            try await store.deleteAttestation(of: DeviceKey(appId: "com.a", deviceId: "never"), at: t0 + .seconds(10))
            let revoked = try await store.attestationRevocations(after: 0, limit: 10)
            #expect(revoked.map(\.keyId) == [Array(repeating: 1, count: 32), Array(repeating: 2, count: 32)])
            #expect(revoked.map(\.revokedAt) == [t0 + .seconds(5), t0 + .seconds(9)])
            #expect(revoked.allSatisfy { $0.appId == "com.a" })
            #expect(revoked[0].seq < revoked[1].seq)
            #expect(try await store.attestationRevocations(after: revoked[0].seq, limit: 10).map(\.keyId) == [Array(repeating: 2, count: 32)])
            #expect(try await store.attestationRevocations(after: 0, limit: 1).count == 1)
            try await store.pruneAttestationRevocations(before: t0 + .seconds(6))
            #expect(try await store.attestationRevocations(after: 0, limit: 10).map(\.keyId) == [Array(repeating: 2, count: 32)])

            #expect(try await store.deviceTokenSecrets().isEmpty)
            let first = DeviceTokenSecret(id: Array(repeating: 1, count: 8), secret: Array(repeating: 7, count: 32), createdAt: t0)
            let second = DeviceTokenSecret(id: Array(repeating: 2, count: 8), secret: Array(repeating: 8, count: 32), createdAt: t0 + .seconds(60))
            try await store.insertDeviceTokenSecret(second)
            try await store.insertDeviceTokenSecret(first)
            #expect(try await store.deviceTokenSecrets() == [first, second], "oldest first")
            try await store.deleteDeviceTokenSecrets(createdBefore: t0 + .seconds(1))
            #expect(try await store.deviceTokenSecrets() == [second])
        }
    }

    @Test("of many redemptions of one challenge at once, one succeeds; of many equal counters at once, one wins", arguments: StoreKind.allCases)
    func races(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let challenge = Array(repeating: UInt8(9), count: 32)
            try await store.insertChallenge(challenge, appId: "com.a", expiresAt: t0 + .seconds(300))
            _ = try await store.saveAttestation(attestation(device, key: 1), replacing: nil)
            let (redeemed, advanced) = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        (
                            try await store.consumeChallenge(challenge, appId: "com.a", now: t0) ? 1 : 0,
                            try await store.advanceCounter(appId: "com.a", keyId: Array(repeating: 1, count: 32), to: 7, appVersion: nil) ? 1 : 0
                        )
                    }
                }
                return try await group.reduce((0, 0)) { ($0.0 + $1.0, $0.1 + $1.1) }
            }
            #expect(redeemed == 1)
            #expect(advanced == 1)

            // Eight first attestations of one new device with eight keys at once: one is kept, the others are refused.
            let fresh = DeviceKey(appId: "com.a", deviceId: "fresh")
            let outcomes = try await withThrowingTaskGroup(of: AttestationSave.self) { group in
                for key in UInt8(10)..<18 {
                    group.addTask { try await store.saveAttestation(attestation(fresh, key: key), replacing: nil) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 == .saved(replaced: nil) }.count == 1, "\(outcomes)")
            let kept = try #require(try await store.attestation(of: fresh)).keyId
            #expect(outcomes.filter { $0 == .deviceBound(keyId: kept) }.count == 7, "\(outcomes)")
        }
    }
}
