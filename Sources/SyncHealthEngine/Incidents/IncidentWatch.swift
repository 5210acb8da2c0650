public import Logging
public import ServiceLifecycle
public import SyncHealthCore
public import SyncHealthStore

/// Groups the firing device alerts into incidents (`IncidentBook`), stores them, and writes their messages for the
/// subscriptions that group by incident, in the same transaction.
///
/// Every replica runs one. A step reads the firing alerts and the open incidents, decides, and writes only if no
/// other replica wrote the same incidents meanwhile (`IncidentStoreError.conflict`); a message's id names the
/// incident and the message's number, so a message is written once whichever replica writes it.
public struct IncidentWatch: Service {
    let engine: any EngineReads
    /// The silences (what holds an incident's messages), the subscriptions that group by incident, and the sender
    /// woken when messages are written.
    let delivery: Delivery
    /// Where incidents and their messages are kept.
    let store: any SyncStore
    let logger: Logger

    /// Watches `engine`'s alerts, keeping incidents in `store`.
    public init(engine: any EngineReads, delivery: Delivery, store: any SyncStore, logger: Logger) {
        self.engine = engine
        self.delivery = delivery
        self.store = store
        self.logger = logger
    }

    /// Watches `engine`'s alerts, keeping incidents in the engine's store.
    public init(engine: any EngineReads, delivery: Delivery, logger: Logger) {
        self.init(engine: engine, delivery: delivery, store: engine.syncStore, logger: logger)
    }

    /// How often the alerts are read: a third of the group wait, between 1 and 10 s.
    var pollInterval: Duration {
        min(max(engine.configuration.incidents.groupWait / 3, .seconds(1)), .seconds(10))
    }

    public func run() async throws {
        await engine.watch(every: pollInterval, logger: logger, failure: "Grouping alerts into incidents failed") { try await step() }
    }

    /// One step; returns when the book next has something to decide.
    @discardableResult
    func step() async throws -> Timestamp? {
        let now = engine.now
        try await delivery.silences.refreshIfShared()
        let groups = try await Self.groups(of: engine)
        let open = try await store.openIncidents()
        let flapping = engine.configuration.notifications
        let told = Set(open.filter { $0.messages > 0 }.map(\.key))
        // How often a key opened lately matters only when an incident of it is to be told opened.
        let recent = groups.keys.contains { !told.contains($0) } ? try await Self.recent(in: store, since: now - flapping.flapWindow) : []
        let step = IncidentBook.step(
            open: open,
            recent: recent,
            groups: groups,
            now: now,
            configuration: engine.configuration.incidents,
            flapping: flapping,
            held: { record in
                let target = Self.target(of: record)
                return delivery.silences.inForce(target.alert, info: target.info, now: now)
            }
        )
        guard !step.records.isEmpty else { return step.nextWake }
        var messages: [OutboxMessage] = []
        for (notice, record) in step.notices {
            let target = Self.target(of: record)
            messages += IncidentMessage.messages(
                record,
                notice: notice,
                subscribers: delivery.webhooks.incidentSubscribers(
                    for: target.alert,
                    errorClass: target.errorClass,
                    attestedOnly: record.key.attestedOnly
                ),
                now: now,
                publicURL: engine.configuration.publicURL
            )
        }
        do {
            try await store.saveIncidents(step.records, messages: messages)
        } catch IncidentStoreError.conflict {
            // Another replica wrote these incidents first: read again at once.
            logger.debug("Incidents changed meanwhile; reading them again")
            return now
        }
        for (notice, record) in step.notices {
            logger.info(
                "Incident told",
                metadata: ["incident.id": "\(record.id)", "incident.notice": "\(notice.rawValue)", "incident.devices": "\(record.devices)"]
            )
        }
        if !messages.isEmpty { delivery.outbox.notify() }
        return step.nextWake
    }

    /// The incidents opened since `since`. Pages are read newest written first until one holds none of them (an
    /// incident is written about when it opens, give or take the group wait).
    static func recent(in store: any SyncStore, since: Timestamp) async throws -> [IncidentRecord] {
        var recent: [IncidentRecord] = []
        var cursor: Int64?
        repeat {
            let page = try await store.incidents(IncidentQuery(limit: 200, cursor: cursor, attestedOnly: nil))
            let inWindow = page.incidents.filter { $0.openedAt >= since }
            recent += inWindow
            cursor = inWindow.isEmpty ? nil : page.nextCursor
        } while cursor != nil
        return recent
    }

    /// What routing and silences see of an incident: an alert of its kind, app and container, the app version its
    /// devices share (a silence on an app version holds an incident while every one of its devices runs that
    /// version), and its error's class.
    static func target(of record: IncidentRecord) -> (alert: AlertRecord, info: DeviceInfo?, errorClass: ErrorClass?) {
        let alert = AlertRecord(
            id: record.id,
            kind: record.key.kind,
            state: .firing,
            deviceId: nil,
            appId: record.key.appId,
            containerId: record.key.containerId,
            startsAt: record.openedAt,
            endsAt: nil,
            summary: "",
            detail: ""
        )
        let errorClass = record.key.signature.map { SyncErrorReport(domain: $0.domain, code: $0.code).errorClass }
        let shared = record.byVersion.count == 1 ? record.byVersion.keys.first.map { DeviceInfo(appVersion: $0) } : nil
        return (alert, shared, errorClass)
    }

    /// The firing device alerts, by incident key: each in its incident of every device, and an attested device's
    /// also in its incident of attested devices.
    static func groups(of engine: any EngineReads) async throws -> [IncidentKey: IncidentGroup] {
        var groups: [IncidentKey: IncidentGroup] = [:]
        for (alert, device) in try await engine.firingAlertDevices() {
            guard let device, AlertKind.deviceKinds.contains(alert.kind) else { continue }
            for attestedOnly in device.attested ? [false, true] : [false] {
                groups[IncidentKey(device: device, kind: alert.kind, attestedOnly: attestedOnly), default: IncidentGroup()]
                    .add(deviceId: device.key.deviceId, appVersion: device.info.appVersion, startsAt: alert.startsAt)
            }
        }
        return groups
    }
}

/// One device of an incident: its alert fires.
public struct IncidentDevice: Sendable {
    /// The device.
    public var key: DeviceKey
    /// Its app version.
    public var appVersion: String?
    /// When its alert fired.
    public var since: Timestamp
}

extension MonitorEngine {
    /// A page of incidents, newest first.
    public func incidents(_ query: IncidentQuery) async throws(EngineError) -> IncidentPage {
        guard isReady else { throw .starting }
        return try await readIncidents { try await syncStore.incidents(query) }
    }

    /// One incident.
    public func incident(id: String) async throws(EngineError) -> IncidentRecord? {
        guard isReady else { throw .starting }
        return try await readIncidents { try await syncStore.incident(id: id) }
    }

    /// The devices of an open incident now, the first to fire first.
    public func devices(of incident: IncidentRecord) async throws(EngineError) -> [IncidentDevice] {
        guard incident.state == .open else { return [] }
        let firing = try await readIncidents { try await firingAlertDevices() }
        return firing.compactMap { alert, device -> IncidentDevice? in
            guard let device, alert.kind == incident.key.kind, !incident.key.attestedOnly || device.attested,
                IncidentKey(device: device, kind: alert.kind, attestedOnly: incident.key.attestedOnly) == incident.key
            else { return nil }
            return IncidentDevice(key: device.key, appVersion: device.info.appVersion, since: alert.startsAt)
        }.sorted { ($0.since, $0.key.deviceId) < ($1.since, $1.key.deviceId) }
    }

    private func readIncidents<T>(_ body: () async throws -> T) async throws(EngineError) -> T {
        do {
            return try await body()
        } catch let error as EngineError {
            throw error
        } catch {
            throw .storeUnavailable
        }
    }
}
