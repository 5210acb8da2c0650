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
            try await store.saveAttestation(attestation(device, key: 1))
            try await store.saveAttestation(attestation(DeviceKey(appId: "com.a", deviceId: "d2"), key: 2, environment: "development"))
            try await store.saveAttestation(attestation(DeviceKey(appId: "com.b", deviceId: "d1"), key: 3))
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

            // A new key for the same device replaces the old one.
            try await store.saveAttestation(attestation(device, key: 4))
            #expect(try await store.attestation(appId: "com.a", keyId: Array(repeating: 1, count: 32)) == nil)
            #expect(try await store.attestation(of: device)?.counter == 0)
            #expect(try await store.attestedDevices(appId: "com.a") == ["production": 1, "development": 1])

            try await store.deleteAttestation(of: device)
            #expect(try await store.attestation(of: device) == nil)
            #expect(try await store.attestedDevices(appId: "com.a") == ["development": 1])
        }
    }

    @Test("of many redemptions of one challenge at once, one succeeds; of many equal counters at once, one wins", arguments: StoreKind.allCases)
    func races(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let challenge = Array(repeating: UInt8(9), count: 32)
            try await store.insertChallenge(challenge, appId: "com.a", expiresAt: t0 + .seconds(300))
            try await store.saveAttestation(attestation(device, key: 1))
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
        }
    }
}
