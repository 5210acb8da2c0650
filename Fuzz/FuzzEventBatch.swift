// libFuzzer target over the event-batch decoder and the monitor fold, seeded with hostile shapes (Fuzz/corpus/hostile-*). Built by scripts/fuzz with
// `swiftc -sanitize=fuzzer,address` together with the sources of SyncHealthCore.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEventBatch(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let data = Data(bytes: start, count: count)
    // Any bytes: decoding either throws a validation error or yields a batch; it must never trap.
    guard let batch = try? EventBatch.decode(json: data) else { return 0 }
    // Device text that reaches labels and chat messages holds no control character.
    for text in [batch.info.containerId, batch.info.platform, batch.info.osVersion, batch.info.appVersion] {
        if let text, EventBatch.hasControlOrFormatCharacter(text) { fatalError("a control character passed the decoder") }
    }
    for event in batch.events {
        if case .activity(let activity) = event.body, let error = activity.error {
            if EventBatch.hasControlOrFormatCharacter(error.domain) { fatalError("a control character passed in an error's domain") }
            if (error.partialErrors?.count ?? 0) > 64 { fatalError("more than 64 partial errors kept") }
        }
    }
    let now = Timestamp(microseconds: 1_795_000_000_000_000)
    var record = DeviceRecord(key: batch.key, info: batch.info, firstSeenAt: now)
    var configuration = AlertConfiguration()
    configuration.errorAfter = .seconds(1)
    let result = record.ingest(batch.events, info: batch.info, now: now, configuration: configuration)
    // Replaying the same events must not change the state: the fold is last-writer-wins per slot.
    let once = record.monitor
    _ = record.ingest(batch.events, info: batch.info, now: now, configuration: configuration)
    if record.monitor != once { fatalError("replaying a batch changed the monitor state") }
    // Every derived value is computable, and evaluation at any later time is safe.
    _ = (once.summary, once.isNotSyncing, once.syncErrorClass, once.isExportAtRisk, once.isUnknownFromQuirk)
    _ = record.evaluateAlerts(now: result.nextDeadline ?? now + .seconds(3600), configuration: configuration)
    var counters = FleetCounters()
    counters.replace(nil, with: record.fleetContribution(now: now, configuration: configuration))
    return 0
}
