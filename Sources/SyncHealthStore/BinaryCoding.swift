public import SyncHealthCore

/// Appends little-endian values to a byte buffer.
package struct ByteWriter {
    package var bytes: [UInt8] = []

    package init(capacity: Int = 128) { bytes.reserveCapacity(capacity) }

    package mutating func u8(_ v: UInt8) { bytes.append(v) }
    package mutating func bool(_ v: Bool) { bytes.append(v ? 1 : 0) }
    package mutating func i64(_ v: Int64) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    package mutating func f64(_ v: Double) { i64(Int64(bitPattern: v.bitPattern)) }
    package mutating func time(_ t: Timestamp) { i64(t.microseconds) }
    package mutating func string(_ s: String) {
        // The bytes go straight in, not through an array of their own: every record encoded writes several strings.
        var s = s
        s.withUTF8 { utf8 in
            i64(Int64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }
    package mutating func optional<T>(_ value: T?, _ write: (inout ByteWriter, T) -> Void) {
        guard let value else { return u8(0) }
        u8(1)
        write(&self, value)
    }
}

/// Reads what `ByteWriter` wrote; every read checks bounds and throws on truncated or invalid data.
package struct ByteReader {
    package struct Invalid: Error { package init() {} }

    package let bytes: [UInt8]
    package var index = 0

    package init(_ bytes: [UInt8]) { self.bytes = bytes }

    package var isAtEnd: Bool { index == bytes.count }

    package mutating func u8() throws -> UInt8 {
        guard index < bytes.count else { throw Invalid() }
        defer { index += 1 }
        return bytes[index]
    }
    package mutating func bool() throws -> Bool { try u8() != 0 }
    package mutating func i64() throws -> Int64 {
        guard index + 8 <= bytes.count else { throw Invalid() }
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(bytes[index + i]) << (8 * UInt64(i)) }
        index += 8
        return Int64(bitPattern: v)
    }
    package mutating func f64() throws -> Double { Double(bitPattern: UInt64(bitPattern: try i64())) }
    package mutating func time() throws -> Timestamp { Timestamp(microseconds: try i64()) }
    package mutating func string() throws -> String {
        let count = try i64()
        guard count >= 0, count <= bytes.count - index else { throw Invalid() }
        defer { index += Int(count) }
        return String(decoding: bytes[index..<(index + Int(count))], as: UTF8.self)
    }
    package mutating func optional<T>(_ read: (inout ByteReader) throws -> T) throws -> T? {
        switch try u8() {
        case 0: return nil
        case 1: return try read(&self)
        default: throw Invalid()
        }
    }
    package mutating func enumValue<E: RawRepresentable>(_: E.Type) throws -> E where E.RawValue == String {
        guard let v = E(rawValue: try string()) else { throw Invalid() }
        return v
    }
}

extension DeviceRecord {
    /// The storage format version written first in every record.
    ///
    /// How the format changes, so that replicas of two consecutive releases read each other's records during a
    /// rolling upgrade: a release may append fields at the end, which the release before skips (the reader below
    /// stops after the fields it knows) and which read as absent from records the release before wrote. A change
    /// that cannot be made that way takes a new version, and a reader accepts its own and the one before
    /// (`oldestReadableBinaryVersion`). `StoredFormatTests` holds every version to golden bytes.
    static let binaryVersion: UInt8 = 1
    /// The oldest version this release reads.
    static let oldestReadableBinaryVersion: UInt8 = 1

    /// A compact binary form of everything but the key (which the store keeps in its own columns).
    public func binaryEncoded() -> [UInt8] {
        // A device's record is about 170 bytes: one buffer holds it.
        var w = ByteWriter(capacity: 256)
        w.u8(Self.binaryVersion)
        w.optional(info.containerId) { $0.string($1) }
        w.optional(info.platform) { $0.string($1) }
        w.optional(info.osVersion) { $0.string($1) }
        w.optional(info.appVersion) { $0.string($1) }
        w.time(firstSeenAt)
        w.time(lastSeenAt)
        for phase in Phase.allCases { Self.write(monitor[phase], &w) }
        w.optional(monitor.network) { $0.bool($1) }
        w.optional(monitor.networkSetAt) { $0.time($1) }
        w.optional(monitor.account) { $0.string($1.rawValue) }
        w.optional(monitor.accountSetAt) { $0.time($1) }
        w.optional(monitor.lastSyncError) { Self.write($1, &$0) }
        w.optional(monitor.lastSyncErrorAt) { $0.time($1) }
        w.i64(Int64(monitor.pendingChanges))
        w.optional(monitor.oldestPendingAt) { $0.time($1) }
        w.optional(monitor.oldestPendingObservedAt) { $0.time($1) }
        w.optional(monitor.pendingSetAt) { $0.time($1) }
        w.optional(monitor.clientSummary) { $0.string($1.rawValue) }
        for kind in AlertKind.deviceKinds {
            w.optional(self[timer: kind].conditionSince) { $0.time($1) }
            w.optional(self[timer: kind].firingSince) { $0.time($1) }
        }
        w.bool(clockSkewDetected)
        w.optional(stalledActivityStart) { $0.time($1) }
        w.bool(attested)
        return w.bytes
    }

    /// Decodes `binaryEncoded()` output for the device `key`.
    public init(key: DeviceKey, binary: [UInt8]) throws {
        var r = ByteReader(binary)
        guard (Self.oldestReadableBinaryVersion...Self.binaryVersion).contains(try r.u8()) else { throw ByteReader.Invalid() }
        let info = DeviceInfo(
            containerId: try r.optional { try $0.string() },
            platform: try r.optional { try $0.string() },
            osVersion: try r.optional { try $0.string() },
            appVersion: try r.optional { try $0.string() }
        )
        self.init(key: key, info: info, firstSeenAt: try r.time())
        lastSeenAt = try r.time()
        for phase in Phase.allCases { monitor[phase] = try Self.readSlot(&r) }
        monitor.network = try r.optional { try $0.bool() }
        monitor.networkSetAt = try r.optional { try $0.time() }
        monitor.account = try r.optional { try $0.enumValue(AccountStatus.self) }
        monitor.accountSetAt = try r.optional { try $0.time() }
        monitor.lastSyncError = try r.optional { try Self.readError(&$0) }
        monitor.lastSyncErrorAt = try r.optional { try $0.time() }
        monitor.pendingChanges = Int(try r.i64())
        monitor.oldestPendingAt = try r.optional { try $0.time() }
        monitor.oldestPendingObservedAt = try r.optional { try $0.time() }
        monitor.pendingSetAt = try r.optional { try $0.time() }
        monitor.clientSummary = try r.optional { try $0.enumValue(SyncStateSummary.self) }
        for kind in AlertKind.deviceKinds {
            self[timer: kind] = RuleTimer(conditionSince: try r.optional { try $0.time() }, firingSince: try r.optional { try $0.time() })
        }
        clockSkewDetected = try r.bool()
        stalledActivityStart = try r.optional { try $0.time() }
        // Appended after 0.1.0, which wrote none.
        if !r.isAtEnd { attested = try r.bool() }
        // Anything after is a later release's fields: skipped (see `binaryVersion`).
    }

    static func write(_ slot: PhaseSlot, _ w: inout ByteWriter) {
        switch slot.state {
        case .notStarted: w.u8(0)
        case .inProgress(let s):
            w.u8(1)
            w.time(s)
        case .succeeded(let s, let e):
            w.u8(2)
            w.time(s)
            w.time(e)
        case .failed(let s, let e, let error):
            w.u8(3)
            w.time(s)
            w.time(e)
            w.optional(error) { write($1, &$0) }
        }
        w.optional(slot.setAt) { $0.time($1) }
    }

    static func readSlot(_ r: inout ByteReader) throws -> PhaseSlot {
        let state: SyncState
        switch try r.u8() {
        case 0: state = .notStarted
        case 1: state = .inProgress(startedAt: try r.time())
        case 2: state = .succeeded(startedAt: try r.time(), endedAt: try r.time())
        case 3: state = .failed(startedAt: try r.time(), endedAt: try r.time(), error: try r.optional { try readError(&$0) })
        default: throw ByteReader.Invalid()
        }
        return PhaseSlot(state: state, setAt: try r.optional { try $0.time() })
    }

    static func write(_ e: SyncErrorReport, _ w: inout ByteWriter) {
        w.string(e.domain)
        w.i64(Int64(e.code))
        w.optional(e.message) { $0.string($1) }
        w.optional(e.retryAfterSeconds) { $0.f64($1) }
        w.optional(e.partialErrors) { w, items in
            w.i64(Int64(items.count))
            for (code, count) in items.sorted(by: { $0.key < $1.key }) {
                w.i64(Int64(code))
                w.i64(Int64(count))
            }
        }
    }

    static func readError(_ r: inout ByteReader) throws -> SyncErrorReport {
        let domain = try r.string()
        let code = Int(try r.i64())
        let message = try r.optional { try $0.string() }
        let retry = try r.optional { try $0.f64() }
        let partial = try r.optional { r -> [Int: Int] in
            let n = try r.i64()
            guard n >= 0, n <= 1024 else { throw ByteReader.Invalid() }
            var items: [Int: Int] = [:]
            for _ in 0..<n { items[Int(try r.i64())] = Int(try r.i64()) }
            return items
        }
        return SyncErrorReport(domain: domain, code: code, message: message, retryAfterSeconds: retry, partialErrors: partial)
    }
}

extension DeviceKey {
    /// A 64-bit hash of the key, stable across runs and machines (FNV-1a), used to key stored event ids.
    public var stableHash: Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in appId.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        hash = (hash ^ 0xFF) &* 0x0000_0100_0000_01B3
        for byte in deviceId.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return Int64(bitPattern: hash)
    }
}
