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

    public func saveAttestation(_ attestation: DeviceAttestation, replacing: [UInt8]?) async throws -> AttestationSave {
        withState { s in
            if let owner = s.attestations.first(where: { $0.keyId == attestation.keyId }) {
                return owner.device == attestation.device ? .unchanged : .keyInUse
            }
            var replaced: [UInt8]?
            if let current = s.attestations.first(where: { $0.device == attestation.device }) {
                guard current.keyId == replacing else { return .deviceBound(keyId: current.keyId) }
                s.attestations.removeAll { $0.device == attestation.device }
                replaced = current.keyId
                s.revoke(appId: current.device.appId, keyId: current.keyId, at: attestation.attestedAt)
            }
            s.attestedVersions[attestation.device] = nil
            s.attestations.append(attestation)
            return .saved(replaced: replaced)
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

    public func deleteAttestation(of device: DeviceKey, at now: Timestamp) async throws {
        withState { s in
            for gone in s.attestations where gone.device == device { s.revoke(appId: device.appId, keyId: gone.keyId, at: now) }
            s.attestations.removeAll { $0.device == device }
        }
    }

    public func deviceTokenSecrets() async throws -> [DeviceTokenSecret] {
        withState { s in s.tokenSecrets.sorted { $0.createdAt < $1.createdAt } }
    }

    public func insertDeviceTokenSecret(_ secret: DeviceTokenSecret) async throws {
        withState { s in s.tokenSecrets.append(secret) }
    }

    public func deleteDeviceTokenSecrets(createdBefore cutoff: Timestamp) async throws {
        withState { s in s.tokenSecrets.removeAll { $0.createdAt < cutoff } }
    }

    public func attestationRevocations(after seq: Int64, limit: Int) async throws -> [AttestationRevocation] {
        withState { s in Array(s.revocations.filter { $0.seq > seq }.prefix(limit)) }
    }

    public func pruneAttestationRevocations(before cutoff: Timestamp) async throws {
        withState { s in s.revocations.removeAll { $0.revokedAt < cutoff } }
    }
}

extension InMemoryStore.State {
    mutating func revoke(appId: String, keyId: [UInt8], at: Timestamp) {
        revocations.append(AttestationRevocation(seq: (revocations.last?.seq ?? 0) + 1, appId: appId, keyId: keyId, revokedAt: at))
    }
}
