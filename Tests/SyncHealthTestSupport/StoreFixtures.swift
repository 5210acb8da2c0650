import Logging
import ServiceLifecycle
public import SyncHealthCore
public import SyncHealthPostgres
public import SyncHealthStore

// Fixtures of the store suites (the conformance suite and the PostgreSQL module's own).

/// Runs `body` with a `PostgresStore` on a fresh database, its connection pool running beside it.
public func withPostgresStore<T>(deliveryLease: Duration = .seconds(60), _ body: (PostgresStore) async throws -> T) async throws -> T {
    try await withPostgresStores(1, deliveryLease: deliveryLease) { stores in try await body(stores[0]) }
}

/// `count` stores on one fresh database, as replicas would open it, each with its connection pool running.
public func withPostgresStores<T>(_ count: Int, deliveryLease: Duration = .seconds(60), _ body: ([PostgresStore]) async throws -> T) async throws -> T
{
    let url = try await PostgresTesting.freshDatabase()
    let stores = try (0..<count).map { _ in try PostgresStore(url: url, deliveryLease: deliveryLease, logger: Logger(label: "test")) }
    return try await withThrowingTaskGroup(of: Void.self) { group in
        for store in stores {
            let service = store.service
            group.addTask { try await service.run() }
        }
        defer { group.cancelAll() }
        for store in stores { try await store.prepare() }
        return try await body(stores)
    }
}

public let t0 = Timestamp(microseconds: 1_795_000_000_000_000)

/// A record that exercises every field of the binary form.
public func richRecord(_ id: String, app: String = "com.example") -> DeviceRecord {
    var r = DeviceRecord(
        key: DeviceKey(appId: app, deviceId: id),
        info: DeviceInfo(containerId: "iCloud.x", platform: "iOS", osVersion: "18.2", appVersion: "3.4"),
        firstSeenAt: t0
    )
    let error = SyncErrorReport(domain: "CKErrorDomain", code: 2, message: "partial ✓", retryAfterSeconds: 1.5, partialErrors: [14: 2, 25: 1])
    let events: [DeviceEvent] = [
        DeviceEvent(eventId: "1", occurredAt: t0, body: .account(.available)),
        DeviceEvent(eventId: "2", occurredAt: t0, body: .network(available: true)),
        DeviceEvent(eventId: "3", occurredAt: t0 + .seconds(1), body: .activity(.init(phase: .setup, state: .succeeded))),
        DeviceEvent(eventId: "4", occurredAt: t0 + .seconds(2), body: .activity(.init(phase: .import, state: .started))),
        DeviceEvent(eventId: "5", occurredAt: t0 + .seconds(3), body: .activity(.init(phase: .export, state: .failed, error: error))),
        DeviceEvent(eventId: "6", occurredAt: t0 + .seconds(4), body: .pending(count: 3, oldestPendingAt: t0)),
        DeviceEvent(eventId: "7", occurredAt: t0 + .seconds(5), body: .heartbeat(clientSummary: .error)),
    ]
    _ = r.ingest(events, info: DeviceInfo(), now: t0 + .seconds(10))
    _ = r.evaluateAlerts(now: t0 + .seconds(1000), configuration: AlertConfiguration())
    return r
}

public func alert(_ id: String, _ kind: AlertKind, _ state: AlertState, device: String = "d1", at: Int64 = 0) -> AlertRecord {
    AlertRecord(
        id: id,
        kind: kind,
        state: state,
        deviceId: device,
        appId: "com.example",
        containerId: "iCloud.x",
        startsAt: t0 + .seconds(at),
        endsAt: state == .resolved ? t0 + .seconds(at + 5) : nil,
        summary: "s",
        detail: "d"
    )
}

public func message(_ id: String, line: String = "L", webhook: String = "wh_1", at: Int64 = 0) -> OutboxMessage {
    OutboxMessage(
        id: id,
        webhookId: webhook,
        orderingKey: OutboxLine(storageKey: line),
        payload: #"{"id":"\#(id)"}"#,
        createdAt: t0 + .seconds(at),
        nextAttemptAt: t0 + .seconds(at)
    )
}

public func subscription(_ id: String = "wh_1") -> WebhookSubscription {
    WebhookSubscription(
        id: id,
        url: "https://example.com/hook",
        kinds: [.syncError, .notSyncing],
        description: "ops",
        secret: "whsec_x",
        createdAt: t0
    )
}
