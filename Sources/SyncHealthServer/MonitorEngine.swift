import HeapModule
import Logging
import ServiceLifecycle
import Synchronization
import SyncHealthCore
import SyncHealthStore

/// The running monitor: an in-memory cache of every device over the durable store, a single serialized
/// pipeline that applies batches and timers in group commits, and the fleet counters.
///
/// Every change goes through `run()`'s pipeline, in order, inside one store transaction: record the event ids
/// (learning which were seen before), plan the new states on copies, write them and commit; only then install
/// them in the cache and answer the requests.
/// A failed commit changes nothing, and its requests get `EngineError.storeUnavailable`.
public final class MonitorEngine: Service, Sendable {
    /// Tunables.
    public let configuration: EngineConfiguration
    let store: any SyncStore
    /// The store when several replicas share it; then nothing about devices is cached (`MonitorEngine+Shared`).
    let shared: (any SharedSyncStore)?
    let clock: any ServiceClock
    let logger: Logger
    /// Subscriptions and delivery; the engine writes outbox rows for it.
    public let webhooks: WebhookCenter
    let metrics: EngineMetrics
    let cache = Mutex(Cache())
    let queue = Mutex(Queue())
    let wake = WakeSignal()
    let phase = Atomic<UInt8>(Phase.starting.rawValue)

    enum Phase: UInt8 {
        case starting, ready, stopping, stopped
    }

    /// Creates an engine over `store`. Call `run()` (as a service) to load the state and serve.
    public init(store: any SyncStore, clock: any ServiceClock, configuration: EngineConfiguration = EngineConfiguration(),
                webhooks: WebhookCenter, logger: Logger) {
        self.store = store
        self.shared = store as? any SharedSyncStore
        self.clock = clock
        self.configuration = configuration
        self.webhooks = webhooks
        self.logger = logger
        self.metrics = EngineMetrics()
    }

    /// Whether the state is loaded and the pipeline runs.
    public var isReady: Bool { phase.load(ordering: .acquiring) == Phase.ready.rawValue }

    /// The clock's current time.
    public var now: Timestamp { clock.now }

    // MARK: Writes

    /// Applies a decoded batch and returns once it is durable.
    ///
    /// - Throws: `EngineError.overloaded` when too many requests wait, `.stopping` during shutdown,
    ///   `.storeUnavailable` when the commit failed (nothing was applied).
    public func ingest(_ batch: EventBatch) async throws(EngineError) -> IngestReceipt {
        let state = phase.load(ordering: .acquiring)
        guard state == Phase.ready.rawValue || state == Phase.starting.rawValue else { throw .stopping }
        if batch.events.isEmpty { return IngestReceipt(accepted: 0, duplicates: 0) }
        let result: Result<IngestReceipt, EngineError> = await withCheckedContinuation { continuation in
            let accepted = queue.withLock { q -> Bool in
                guard q.jobs.count < configuration.maxQueuedRequests else { return false }
                q.jobs.append(IngestJob(batch: batch, continuation: continuation))
                return true
            }
            if accepted {
                wake.signal()
            } else {
                metrics.queueShed.increment()
                continuation.resume(returning: .failure(.overloaded))
            }
        }
        return try result.get()
    }

    // MARK: Reads

    /// A device's state at `now`, or `nil` if unknown.
    public func device(_ key: DeviceKey) async throws(EngineError) -> DeviceSnapshot? {
        try checkReadable()
        let now = clock.now
        if let shared {
            return try await read { try await shared.device(key) }.map { DeviceSnapshot(record: $0, now: now, configuration: configuration.alerts) }
        }
        return cache.withLock { c in
            c.index[key].map { DeviceSnapshot(record: c.records[$0], now: now, configuration: configuration.alerts) }
        }
    }

    /// Every device with `deviceId`, in any app (for lookups that leave out the app).
    public func devices(withId deviceId: String) async throws(EngineError) -> [DeviceKey] {
        try checkReadable()
        if let shared { return try await read { try await shared.deviceKeys(deviceId: deviceId) } }
        return cache.withLock { $0.keys(deviceId: deviceId) }
    }

    /// A page of devices matching `filter`, in first-seen order.
    public func devices(_ filter: DeviceFilter, after cursor: Int, limit: Int) async throws(EngineError) -> DevicePage {
        try checkReadable()
        let now = clock.now
        if let shared {
            let query = DeviceQuery(appId: filter.appId, containerId: filter.containerId, summary: filter.summary, broken: filter.broken)
            let page = try await read { try await shared.devices(query, after: Int64(cursor), limit: limit) }
            return DevicePage(devices: page.records.map { DeviceSnapshot(record: $0, now: now, configuration: configuration.alerts) },
                              nextCursor: page.nextCursor.map { Int($0) })
        }
        // At most `scanBudget` devices are looked at per page, a chunk per hold of the cache lock: one hold over
        // the whole budget (~20 ms with 1M devices) stalled every commit and read behind it (BENCHMARKS.md).
        // Indices only grow, so a page taken over several holds lists each device once.
        let scanBudget = 200_000
        let start = max(0, cursor)
        let chunk = max(1, configuration.listScanChunk)
        var result: [DeviceSnapshot] = []
        var index = start
        var total = 0
        repeat {
            let end = min(index + chunk, start + scanBudget)
            (index, total) = cache.withLock { c in
                var i = index
                while i < min(end, c.records.count), result.count < limit {
                    if filter.matches(c.contributions[i]) {
                        result.append(DeviceSnapshot(record: c.records[i], now: now, configuration: configuration.alerts))
                    }
                    i += 1
                }
                return (i, c.records.count)
            }
        } while index < total && result.count < limit && index - start < scanBudget
        return DevicePage(devices: result, nextCursor: index < total ? index : nil)
    }

    /// The fleet counters of a scope. O(1) in the fleet's size: kept in memory, or in the shared store's
    /// counter rows (updated in the same transaction as the devices).
    public func summary(_ scope: FleetScope) async throws(EngineError) -> FleetCounts {
        try checkReadable()
        if let shared { return try await read { try await shared.counts(scope) } }
        return cache.withLock { $0.counters[scope] }
    }

    /// A page of alerts from the store.
    public func alerts(_ query: AlertQuery) async throws(EngineError) -> AlertPage {
        try checkReadable()
        return try await read { try await store.alerts(query) }
    }

    /// A store read; a failure is logged and answered as `storeUnavailable`.
    func read<T>(_ body: () async throws -> T) async throws(EngineError) -> T {
        do {
            return try await body()
        } catch {
            logger.error("Store read failed", metadata: ["error": "\(error)"])
            throw .storeUnavailable
        }
    }

    /// The number of devices tracked (in this process's cache; 0 with a shared store).
    public var deviceCount: Int { cache.withLock { $0.records.count } }

    func checkReadable() throws(EngineError) {
        if phase.load(ordering: .acquiring) == Phase.starting.rawValue { throw .starting }
    }
}

/// A device's state as the API shows it.
public struct DeviceSnapshot: Sendable {
    /// The record.
    public var record: DeviceRecord
    /// Whether the device is silent now.
    public var silent: Bool
    /// Its firing alerts.
    public var alerts: [AlertRecord]

    init(record: DeviceRecord, now: Timestamp, configuration: AlertConfiguration) {
        self.record = record
        self.silent = record.isSilent(now: now, configuration: configuration)
        self.alerts = AlertText.firing(record)
    }
}

/// Filters of `GET /v1/devices`.
public struct DeviceFilter: Sendable {
    /// Only this summary value.
    public var summary: SyncStateSummary?
    /// Only broken (`true`) or only not broken (`false`) devices.
    public var broken: Bool?
    /// Only this app.
    public var appId: String?
    /// Only this container.
    public var containerId: String?

    /// Creates a filter.
    public init(summary: SyncStateSummary? = nil, broken: Bool? = nil, appId: String? = nil, containerId: String? = nil) {
        self.summary = summary
        self.broken = broken
        self.appId = appId
        self.containerId = containerId
    }

    /// Whether a device matches, from its fleet contribution alone (which carries its app, container and summary).
    func matches(_ contribution: FleetContribution) -> Bool {
        if let appId, contribution.appId != appId { return false }
        if let containerId, contribution.containerId != containerId { return false }
        if let summary, contribution.summary != summary { return false }
        if let broken, contribution.summary.isBroken != broken { return false }
        return true
    }
}

/// A page of devices.
public struct DevicePage: Sendable {
    /// The devices.
    public var devices: [DeviceSnapshot]
    /// Where the next page starts, or `nil` at the end.
    public var nextCursor: Int?
}

/// A due time in the timer heap; `index` is the device's position in the cache.
struct Deadline: Comparable {
    var at: Timestamp
    var index: Int32

    static func < (lhs: Deadline, rhs: Deadline) -> Bool { (lhs.at, lhs.index) < (rhs.at, rhs.index) }
}

/// The in-memory cache. Only the pipeline mutates it.
///
/// Per device it grows by one entry in each of its index and arrays, which never move what they hold: an
/// `Array` or `Dictionary` that doubles moves every device at once, under the lock every ingest takes.
struct Cache {
    var index = ShardedDictionary<DeviceKey, Int>()
    var records = ChunkedArray<DeviceRecord>()
    var contributions = ChunkedArray<FleetContribution>()
    /// Each device's current deadline (`Int64.max` for none).
    var deadlineOf = ChunkedArray<Int64>()
    /// When each device's entry in `deadlines` comes up (`Int64.max` for none); an entry at another time is stale.
    ///
    /// A deadline that moves later keeps its entry, which puts the device back at its new deadline when it comes
    /// up. A device's silence deadline moves with each event it sends, so otherwise every event added an entry:
    /// the heap held up to twice as many entries as devices, and was rebuilt whole, under the lock, once stale
    /// entries outnumbered live ones (every N events with N devices).
    var queuedAt = ChunkedArray<Int64>()
    var deadlines = Heap<Deadline>()
    var counters = FleetCounters()
    var fleetAlerts = FleetAlerts()
    var firing: [AlertKind: Int] = [:]
    var policy = NotificationPolicy()
    /// Every app with a device here: a lookup by device id alone tries each (apps are few, devices many).
    var appIds: Set<String> = []

    /// Adds a device at the end; returns its index.
    mutating func append(_ record: DeviceRecord, contribution: FleetContribution) -> Int {
        let i = records.count
        index[record.key] = i
        records.append(record)
        contributions.append(contribution)
        deadlineOf.append(.max)
        queuedAt.append(.max)
        appIds.insert(record.key.appId)
        return i
    }

    /// The devices with `deviceId`, in any app.
    func keys(deviceId: String) -> [DeviceKey] {
        appIds.sorted().map { DeviceKey(appId: $0, deviceId: deviceId) }.filter { index[$0] != nil }
    }

    mutating func setDeadline(_ at: Timestamp?, for index: Int) {
        let value = at?.microseconds ?? .max
        deadlineOf[index] = value
        // Later than the entry queued (or none at all): that entry comes up first and puts the device back.
        guard value < queuedAt[index] else { return }
        queuedAt[index] = value
        deadlines.insert(Deadline(at: Timestamp(microseconds: value), index: Int32(index)))
    }

    /// Rebuilds the heap from `deadlineOf` once stale entries outnumber live ones (entries of deadlines that moved
    /// earlier), so that the heap stays the size of the fleet.
    mutating func compactDeadlinesIfNeeded() {
        guard deadlines.count > 2 * records.count + 1024 else { return }
        var live: [Deadline] = []
        live.reserveCapacity(records.count)
        for i in deadlineOf.indices {
            let at = deadlineOf[i]
            queuedAt[i] = at
            if at != .max { live.append(Deadline(at: Timestamp(microseconds: at), index: Int32(i))) }
        }
        deadlines = Heap(live)
    }

    /// Pops up to `limit` devices whose deadline is due at `now`, looking at `limit` entries at most. An entry
    /// that comes up before its device's deadline (which moved later) is queued again at the deadline.
    mutating func popDue(now: Timestamp, limit: Int) -> [Int] {
        var due: [Int] = []
        var looked = 0
        while looked < limit, let top = deadlines.min, top.at <= now {
            looked += 1
            _ = deadlines.popMin()
            let i = Int(top.index)
            guard queuedAt[i] == top.at.microseconds else { continue }
            let at = deadlineOf[i]
            if at <= now.microseconds {
                queuedAt[i] = .max
                deadlineOf[i] = .max
                due.append(i)
            } else {
                // Later, or none (`.max`, which stays unqueued).
                queuedAt[i] = at
                if at != .max { deadlines.insert(Deadline(at: Timestamp(microseconds: at), index: top.index)) }
            }
        }
        return due
    }
}

struct IngestJob {
    var batch: EventBatch
    var continuation: CheckedContinuation<Result<IngestReceipt, EngineError>, Never>
}

struct Queue {
    var jobs: [IngestJob] = []
}
