import CoreMetrics
import SyncHealthCore
import SyncHealthStore
import Synchronization

/// The front both pipelines share: the requests waiting for a group, and the engine's phase.
///
/// Requests are answered through their continuation once the group that holds them commits or fails.
final class IngestQueue: Sendable {
    enum Phase: UInt8 {
        case starting, ready, stopping, stopped
    }

    private let jobs = Mutex<[IngestJob]>([])
    private let erasures = Mutex<[ErasureJob]>([])
    private let phaseValue = Atomic<UInt8>(Phase.starting.rawValue)
    /// Signalled when a request arrives or shutdown begins; the pipeline's loop waits on it.
    let wake = WakeSignal()
    private let capacity: Int
    private let metrics: EngineMetrics

    init(capacity: Int, metrics: EngineMetrics) {
        self.capacity = capacity
        self.metrics = metrics
    }

    var phase: Phase { Phase(rawValue: phaseValue.load(ordering: .acquiring)) ?? .stopped }

    func set(_ phase: Phase) {
        phaseValue.store(phase.rawValue, ordering: .releasing)
    }

    var isReady: Bool { phase == .ready }

    /// Reads are refused until the state is loaded.
    func checkReadable() throws(EngineError) {
        if phase == .starting { throw .starting }
    }

    /// Queues a batch and waits for the group that commits it.
    func submit(_ batch: EventBatch) async throws(EngineError) -> IngestReceipt {
        let phase = self.phase
        guard phase == .ready || phase == .starting else { throw .stopping }
        if batch.events.isEmpty { return IngestReceipt(accepted: 0, duplicates: 0) }
        let result: Result<IngestReceipt, EngineError> = await withCheckedContinuation { continuation in
            let accepted = jobs.withLock { jobs -> Bool in
                guard jobs.count < capacity else { return false }
                jobs.append(IngestJob(batch: batch, continuation: continuation))
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

    /// Queues an erasure and waits for the group that commits it; returns whether the device was stored, and the
    /// time of that group.
    func submitErasure(_ key: DeviceKey) async throws(EngineError) -> (existed: Bool, at: Timestamp) {
        let phase = self.phase
        guard phase == .ready || phase == .starting else { throw .stopping }
        let result: Result<(existed: Bool, at: Timestamp), EngineError> = await withCheckedContinuation { continuation in
            erasures.withLock { $0.append(ErasureJob(key: key, continuation: continuation)) }
            wake.signal()
        }
        return try result.get()
    }

    /// Whether no request and no erasure waits.
    var isEmpty: Bool {
        jobs.withLock { $0.isEmpty } && erasures.withLock { $0.isEmpty }
    }

    /// Up to `limit` queued erasures, oldest first.
    func takeErasures(limit: Int) -> [ErasureJob] {
        erasures.withLock { $0.takeFirst(limit) }
    }

    /// Up to `limit` queued requests, oldest first.
    func take(limit: Int) -> [IngestJob] {
        jobs.withLock { $0.takeFirst(limit) }
    }
}

/// A queued request.
struct IngestJob {
    var batch: EventBatch
    var continuation: CheckedContinuation<Result<IngestReceipt, EngineError>, Never>

    /// The (device, event ids) pair a group claims for it.
    var claim: EventIdClaim { (batch.key, batch.events.map(\.eventId)) }
}

/// A queued erasure (`MonitorEngine.erase`).
struct ErasureJob {
    var key: DeviceKey
    var continuation: CheckedContinuation<Result<(existed: Bool, at: Timestamp), EngineError>, Never>
}

extension Array {
    /// Removes and returns up to `limit` elements from the front.
    mutating func takeFirst(_ limit: Int) -> [Element] {
        let n = Swift.min(count, limit)
        defer { removeFirst(n) }
        return Array(prefix(n))
    }
}
