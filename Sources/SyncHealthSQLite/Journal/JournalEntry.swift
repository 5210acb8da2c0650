import SyncHealthCore
import SyncHealthStore

/// One committed group as the embedded store's journal holds it, and as a fold writes it into the tables.
struct JournalEntry: Sendable {
    /// The journal's sequence number: entries fold in this order, and `journal_state.folded_through` says which
    /// are in the tables.
    var seq: Int64
    /// When the ids were recorded (service clock, microseconds).
    var recordedAt: Int64
    /// Devices and their encoded records.
    var devices: [(appId: String, deviceId: String, state: [UInt8])]
    /// Event ids to remember, by device hash, each as its UTF-8 bytes.
    var ids: [(hash: Int64, id: [UInt8])]
    var alerts: [AlertRecord]
    var fleet: [(containerId: String, startsAt: Timestamp?)]
    var outbox: [OutboxMessage]
    /// Devices that leave the store, after the rest of the entry.
    var removals: [DeviceRemoval]

    /// The entry for `changes`, with `ids` as the ids to record (a claiming commit passes the claimed new ones).
    init(_ changes: StoreChanges, ids: [(hash: Int64, id: [UInt8])], seq: Int64 = 0) {
        self.seq = seq
        recordedAt = changes.recordedAt.microseconds
        devices = changes.devices.map { (appId: $0.key.appId, deviceId: $0.key.deviceId, state: $0.binaryEncoded()) }
        self.ids = ids
        alerts = changes.alerts
        fleet = changes.fleetAlerts
        outbox = changes.outbox
        removals = changes.removals
    }

    /// The entry's payload in the journal (the sequence number is in the record's header).
    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 64 + devices.reduce(0) { $0 + $1.state.count + 48 } + ids.count * 48)
        w.i64(recordedAt)
        w.i64(Int64(devices.count))
        for d in devices {
            w.string(d.appId)
            w.string(d.deviceId)
            w.byteString(d.state)
        }
        w.i64(Int64(ids.count))
        for (hash, id) in ids {
            w.i64(hash)
            w.byteString(id)
        }
        w.i64(Int64(alerts.count))
        for a in alerts {
            w.string(a.id)
            w.string(a.kind.rawValue)
            w.string(a.state.rawValue)
            w.optional(a.deviceId) { $0.string($1) }
            w.optional(a.appId) { $0.string($1) }
            w.optional(a.containerId) { $0.string($1) }
            w.time(a.startsAt)
            w.optional(a.endsAt) { $0.time($1) }
            w.string(a.summary)
            w.string(a.detail)
        }
        w.i64(Int64(fleet.count))
        for (container, startsAt) in fleet {
            w.string(container)
            w.optional(startsAt) { $0.time($1) }
        }
        w.i64(Int64(outbox.count))
        for m in outbox {
            w.string(m.id)
            w.string(m.webhookId)
            w.string(m.orderingKey.storageKey)
            w.string(m.payload)
            w.time(m.createdAt)
            w.i64(Int64(m.attempts))
            w.time(m.nextAttemptAt)
            w.string(m.state.rawValue)
        }
        // The second format's section: written only when there is something in it, so that an entry without
        // removals or reasons is the same bytes as in the first format, which the release before reads whole.
        let reasons = alerts.enumerated().compactMap { i, a in a.reason.map { (i, $0) } }
        if !removals.isEmpty || !reasons.isEmpty {
            w.i64(Int64(removals.count))
            for r in removals {
                w.string(r.key.appId)
                w.string(r.key.deviceId)
                w.string(r.reason.rawValue)
            }
            w.i64(Int64(reasons.count))
            for (i, reason) in reasons {
                w.i64(Int64(i))
                w.string(reason.rawValue)
            }
        }
        return w.bytes
    }

    /// Decodes a payload that `encoded()` wrote. Sections a later release appends are skipped, as in device
    /// records (`DeviceRecord.binaryVersion`): a release rolled back still replays the journal the later one left.
    init(seq: Int64, payload: [UInt8]) throws {
        var r = ByteReader(payload)
        self.seq = seq
        recordedAt = try r.i64()
        devices = try (0..<r.count()).map { _ in (appId: try r.string(), deviceId: try r.string(), state: try r.byteString()) }
        ids = try (0..<r.count()).map { _ in (hash: try r.i64(), id: try r.byteString()) }
        alerts = try (0..<r.count()).map { _ in
            AlertRecord(
                id: try r.string(),
                kind: try r.enumValue(AlertKind.self),
                state: try r.enumValue(AlertState.self),
                deviceId: try r.optional { try $0.string() },
                appId: try r.optional { try $0.string() },
                containerId: try r.optional { try $0.string() },
                startsAt: try r.time(),
                endsAt: try r.optional { try $0.time() },
                summary: try r.string(),
                detail: try r.string()
            )
        }
        fleet = try (0..<r.count()).map { _ in (containerId: try r.string(), startsAt: try r.optional { try $0.time() }) }
        outbox = try (0..<r.count()).map { _ in
            OutboxMessage(
                id: try r.string(),
                webhookId: try r.string(),
                orderingKey: OutboxLine(storageKey: try r.string()),
                payload: try r.string(),
                createdAt: try r.time(),
                attempts: Int(try r.i64()),
                nextAttemptAt: try r.time(),
                state: try r.enumValue(OutboxMessage.State.self)
            )
        }
        removals = []
        if r.isAtEnd { return }
        removals = try (0..<r.count()).map { _ in
            DeviceRemoval(key: DeviceKey(appId: try r.string(), deviceId: try r.string()), reason: try r.enumValue(DeviceRemoval.Reason.self))
        }
        if r.isAtEnd { return }
        for _ in 0..<(try r.count()) {
            let i = try r.i64()
            let reason = try r.enumValue(ResolveReason.self)
            guard i >= 0, i < Int64(alerts.count) else { throw ByteReader.Invalid() }
            alerts[Int(i)].reason = reason
        }
    }
}

extension ByteWriter {
    /// A length-prefixed byte string.
    mutating func byteString(_ b: [UInt8]) {
        i64(Int64(b.count))
        bytes.append(contentsOf: b)
    }
}

extension ByteReader {
    /// A length-prefixed byte string.
    mutating func byteString() throws -> [UInt8] {
        let count = try i64()
        guard count >= 0, count <= bytes.count - index else { throw Invalid() }
        defer { index += Int(count) }
        return Array(bytes[index..<(index + Int(count))])
    }

    /// An element count, checked against what is left to read (each element takes at least a byte).
    mutating func count() throws -> Int {
        let count = try i64()
        guard count >= 0, count <= bytes.count - index else { throw Invalid() }
        return Int(count)
    }
}
