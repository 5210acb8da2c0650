import SyncHealthAttest
import SyncHealthCore
import SyncHealthEngine
import SyncHealthStore

/// `GET /v1/devices/{deviceId}`: a device's status, with explicit `null` for unknown values.
struct DeviceStatusDTO: Encodable {
    let snapshot: DeviceSnapshot
    /// The device's App Attest key: `.some(nil)` for a device without one, `nil` where it was not looked up (lists).
    var attestation: DeviceAttestation?? = nil

    enum Key: String, CodingKey {
        case deviceId, appId, containerId, platform, osVersion, appVersion, firstSeenAt, lastSeenAt
        case setupState, importState, exportState, isNetworkAvailable, accountStatus
        case setupError, importError, exportError, lastSyncError, hasSyncError, shouldBeSyncing, isNotSyncing
        case syncStateSummary, isBroken, isInProgress, symbolName, symbolColor, description
        case pendingChanges, oldestPendingAt, silent, alerts, clientSummary, clockSkewDetected, errorClass
        case attested, attestation
    }

    struct AttestationDTO: Encodable {
        var environment: String
        var attestedAt: String
    }

    func encode(to encoder: any Encoder) throws {
        let r = snapshot.record
        let m = r.monitor
        let summary = m.summary
        var c = encoder.container(keyedBy: Key.self)
        if let attestation {
            try c.encode(attestation != nil, forKey: .attested)
            try c.encode(attestation.map { AttestationDTO(environment: $0.environment, attestedAt: $0.attestedAt.rfc3339) }, forKey: .attestation)
        }
        try c.encode(r.key.deviceId, forKey: .deviceId)
        try c.encode(r.key.appId, forKey: .appId)
        try c.encode(r.info.containerId, forKey: .containerId)
        try c.encode(r.info.platform, forKey: .platform)
        try c.encode(r.info.osVersion, forKey: .osVersion)
        try c.encode(r.info.appVersion, forKey: .appVersion)
        try c.encode(r.firstSeenAt.rfc3339, forKey: .firstSeenAt)
        try c.encode(r.lastSeenAt.rfc3339, forKey: .lastSeenAt)
        try c.encode(PhaseStateDTO(m.setup.state), forKey: .setupState)
        try c.encode(PhaseStateDTO(m.importPhase.state), forKey: .importState)
        try c.encode(PhaseStateDTO(m.export.state), forKey: .exportState)
        try c.encode(m.network, forKey: .isNetworkAvailable)
        try c.encode(m.account?.rawValue, forKey: .accountStatus)
        try c.encode(m.setupError.map(ErrorDTO.init), forKey: .setupError)
        try c.encode(m.importError.map(ErrorDTO.init), forKey: .importError)
        try c.encode(m.exportError.map(ErrorDTO.init), forKey: .exportError)
        try c.encode(m.lastSyncError.map(ErrorDTO.init), forKey: .lastSyncError)
        try c.encode(m.hasSyncError, forKey: .hasSyncError)
        try c.encode(m.shouldBeSyncing, forKey: .shouldBeSyncing)
        try c.encode(m.isNotSyncing, forKey: .isNotSyncing)
        try c.encode(summary.rawValue, forKey: .syncStateSummary)
        try c.encode(summary.isBroken, forKey: .isBroken)
        try c.encode(summary == .inProgress, forKey: .isInProgress)
        try c.encode(summary.symbolName, forKey: .symbolName)
        try c.encode(summary.symbolColor, forKey: .symbolColor)
        try c.encode(summary.description, forKey: .description)
        try c.encode(m.pendingChanges, forKey: .pendingChanges)
        try c.encode(m.oldestPendingAt?.rfc3339, forKey: .oldestPendingAt)
        try c.encode(snapshot.silent, forKey: .silent)
        try c.encode(snapshot.alerts.map(AlertJSON.init), forKey: .alerts)
        try c.encode(m.clientSummary?.rawValue, forKey: .clientSummary)
        try c.encode(r.clockSkewDetected, forKey: .clockSkewDetected)
        try c.encode(m.syncErrorClass?.rawValue, forKey: .errorClass)
    }
}

/// One phase: `{"status", "startedAt", "endedAt", "error"}`.
struct PhaseStateDTO: Encodable {
    let state: SyncState
    init(_ state: SyncState) { self.state = state }

    enum Key: String, CodingKey { case status, startedAt, endedAt, error }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(state.status.rawValue, forKey: .status)
        try c.encode(state.startedAt?.rfc3339, forKey: .startedAt)
        try c.encode(state.endedAt?.rfc3339, forKey: .endedAt)
        try c.encode(state.error.map(ErrorDTO.init), forKey: .error)
    }
}

/// An error as reported, with its class.
struct ErrorDTO: Encodable {
    let domain: String
    let code: Int
    let message: String?
    let retryAfterSeconds: Double?
    let partialErrors: [String: Int]?
    let errorClass: String
    let name: String?
    let advice: ErrorAdvice?

    init(_ e: SyncErrorReport) {
        domain = e.domain
        code = e.code
        name = e.cloudKitName
        message = e.message
        retryAfterSeconds = e.retryAfterSeconds
        partialErrors = e.partialErrors.map { Dictionary(uniqueKeysWithValues: $0.map { (String($0.key), $0.value) }) }
        errorClass = e.errorClass.rawValue
        advice = e.advice
    }

    enum CodingKeys: String, CodingKey {
        case domain, code, message, retryAfterSeconds, partialErrors, name, advice
        case errorClass = "class"
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(domain, forKey: .domain)
        try c.encode(code, forKey: .code)
        try c.encode(name, forKey: .name)
        try c.encodeIfPresent(message, forKey: .message)
        try c.encodeIfPresent(retryAfterSeconds, forKey: .retryAfterSeconds)
        try c.encodeIfPresent(partialErrors, forKey: .partialErrors)
        try c.encode(errorClass, forKey: .errorClass)
        try c.encode(advice.map { ["who": $0.who.rawValue, "text": $0.text] }, forKey: .advice)
    }
}

/// `GET /v1/summary`; with a scope, an item of `GET /v1/summary/scopes` and a `summary` event of the stream; with
/// a time, a point of `GET /v1/summary/history`.
struct FleetSummaryDTO: Encodable {
    let counts: FleetCounts
    var generatedAt: Timestamp?
    var scope: FleetScope?
    var at: Timestamp?
    /// Devices with an App Attest key, by environment (`nil`: not counted, as in history).
    var attested: [String: Int]?
    /// The scope's app's App Attest mode (`report`, `require`), where `SYNCHEALTH_APP_ATTEST` lists it.
    var appAttest: String?

    init(counts: FleetCounts, generatedAt: Timestamp? = nil, scope: FleetScope? = nil, at: Timestamp? = nil, attested: [String: Int]? = nil) {
        self.counts = counts
        self.generatedAt = generatedAt
        self.scope = scope
        self.at = at
        self.attested = attested
    }

    enum Key: String, CodingKey {
        case at, appId, containerId, devices, active, silent, broken, notSyncing, bySummary, byErrorClass, generatedAt, attestedDevices, appAttest
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        if let at { try c.encode(at.rfc3339, forKey: .at) }
        if let scope {
            try c.encode(scope.appId, forKey: .appId)
            try c.encode(scope.containerId, forKey: .containerId)
        }
        try c.encode(counts.devices, forKey: .devices)
        try c.encode(counts.active, forKey: .active)
        try c.encode(counts.silent, forKey: .silent)
        try c.encode(counts.broken, forKey: .broken)
        try c.encode(counts.notSyncing, forKey: .notSyncing)
        try c.encode(OrderedCounts(pairs: counts.bySummary.map { ($0.0.rawValue, $0.1) }), forKey: .bySummary)
        try c.encode(OrderedCounts(pairs: counts.byErrorClass.map { ($0.0.rawValue, $0.1) }), forKey: .byErrorClass)
        if let generatedAt { try c.encode(generatedAt.rfc3339, forKey: .generatedAt) }
        if let attested {
            try c.encode(
                OrderedCounts(pairs: AppAttestEnvironment.allCases.map { ($0.rawValue, attested[$0.rawValue] ?? 0) }),
                forKey: .attestedDevices
            )
        }
        if let appAttest { try c.encode(appAttest, forKey: .appAttest) }
    }
}

/// A JSON object of counts whose keys keep a fixed order.
struct OrderedCounts: Encodable {
    let pairs: [(String, Int)]

    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        for (name, value) in pairs { try c.encode(value, forKey: Key(stringValue: name)) }
    }
}

/// `{"data": [...], "nextCursor": "..." | null}`.
struct PageDTO<Item: Encodable>: Encodable {
    let data: [Item]
    let nextCursor: String?

    enum Key: String, CodingKey { case data, nextCursor }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(data, forKey: .data)
        try c.encode(nextCursor, forKey: .nextCursor)
    }
}

/// `202` body of `POST /v1/events`.
struct IngestResponseDTO: Encodable {
    let accepted: Int
    let duplicates: Int
    let rejected: [EventBatch.Rejection]
}
