public import SyncHealthCore

extension InMemoryStore {
    public func insertChallenge(_ challenge: [UInt8], appId: String, expiresAt: Timestamp) async throws {
        withState { $0.challenges[challenge] = (appId, expiresAt) }
    }

    public func consumeChallenge(_ challenge: [UInt8], appId: String, now: Timestamp) async throws -> Bool {
        withState { s in
            guard let issued = s.challenges.removeValue(forKey: challenge) else { return false }
            return issued.appId == appId && now < issued.expiresAt
        }
    }

    public func pruneChallenges(before cutoff: Timestamp, limit: Int) async throws -> Int {
        withState { s in
            let old = s.challenges.filter { $0.value.expiresAt < cutoff }.keys.prefix(limit)
            for challenge in old { s.challenges[challenge] = nil }
            return old.count
        }
    }

    public func saveAttestation(_ attestation: DeviceAttestation) async throws {
        withState { s in
            s.attestations.removeAll { $0.device == attestation.device || $0.keyId == attestation.keyId }
            s.attestedVersions[attestation.device] = nil
            s.attestations.append(attestation)
        }
    }

    public func attestation(appId: String, keyId: [UInt8]) async throws -> DeviceAttestation? {
        withState { s in s.attestations.first { $0.device.appId == appId && $0.keyId == keyId } }
    }

    public func attestation(of device: DeviceKey) async throws -> DeviceAttestation? {
        withState { s in s.attestations.first { $0.device == device } }
    }

    public func attestations(of devices: [DeviceKey]) async throws -> [DeviceKey: DeviceAttestation] {
        let wanted = Set(devices)
        return withState { s in
            Dictionary(s.attestations.filter { wanted.contains($0.device) }.map { ($0.device, $0) }, uniquingKeysWith: { _, last in last })
        }
    }

    public func advanceCounter(appId: String, keyId: [UInt8], to counter: UInt32, appVersion: String?) async throws -> Bool {
        withState { s in
            guard let index = s.attestations.firstIndex(where: { $0.device.appId == appId && $0.keyId == keyId }),
                s.attestations[index].counter < counter
            else { return false }
            s.attestations[index].counter = counter
            s.attestedVersions[s.attestations[index].device] = appVersion
            return true
        }
    }

    public func attestedDevicesByAppVersion(appId: String) async throws -> [String: Int] {
        withState { s in
            s.attestations.filter { $0.device.appId == appId }.reduce(into: [:]) { $0[s.attestedVersions[$1.device] ?? "", default: 0] += 1 }
        }
    }

    public func attestedDevices(appId: String?) async throws -> [String: Int] {
        withState { s in
            s.attestations.filter { appId == nil || $0.device.appId == appId }.reduce(into: [:]) { $0[$1.environment, default: 0] += 1 }
        }
    }

    public func deleteAttestation(of device: DeviceKey) async throws {
        withState { s in s.attestations.removeAll { $0.device == device } }
    }
}
