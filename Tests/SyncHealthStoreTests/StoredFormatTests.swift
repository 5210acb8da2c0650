import Foundation
import SyncHealthCore
import SyncHealthMonitorFixtures
import SyncHealthTestSupport
import Testing

@testable import SyncHealthSQLite
@testable import SyncHealthStore

/// The stored formats, held to golden bytes: a change to a format must be a deliberate one, with a fixture of its
/// own (docs/operations.md, "Upgrading").
@Suite("Stored formats: golden bytes, and reading across one release")
struct StoredFormatTests {
    /// A device with every field of the format set: each phase in another state, an error with a message, a retry
    /// delay and per-item codes, network and account, pending changes, the client's summary, firing timers.
    static func fullRecord() -> DeviceRecord {
        var f = EventFactory()
        let key = DeviceKey(appId: "com.example.notes", deviceId: "golden-1")
        var record = DeviceRecord(key: key, firstSeenAt: Timestamp(microseconds: 1_700_000_000_000_000))
        let now = Timestamp(microseconds: 1_700_000_060_000_000)
        let partial = SyncErrorReport(
            domain: "CKErrorDomain",
            code: 2,
            message: "Partial failure",
            retryAfterSeconds: 2.5,
            partialErrors: [14: 2, 25: 1]
        )
        var events = [
            f.account(.available, at: now - .seconds(50)), f.network(true, at: now - .seconds(49)),
            f.succeeded(.setup, at: now - .seconds(48)), f.started(.import, at: now - .seconds(47)),
            f.failed(.export, at: now - .seconds(46), error: partial),
        ]
        events.append(DeviceEvent(eventId: "p", occurredAt: now - .seconds(45), body: .pending(count: 3, oldestPendingAt: now - .seconds(100))))
        events.append(DeviceEvent(eventId: "h", occurredAt: now - .seconds(44), body: .heartbeat(clientSummary: .error)))
        let info = DeviceInfo(containerId: "iCloud.com.example.notes", platform: "iOS", osVersion: "18.1", appVersion: "3.2")
        _ = record.ingest(events, info: info, now: now)
        _ = record.evaluateAlerts(now: now + .seconds(3600), configuration: AlertConfiguration())
        return record
    }

    /// `fullRecord()` as version 1 of the device format wrote it.
    static let deviceV1 = """
        0101180000000000000069436c6f75642e636f6d2e6578616d706c652e6e6f746573010300000000000000694f5301040000\
        000000000031382e31010300000000000000332e3200401e18240a060000c7b11b240a060002005bd518240a0600005bd518\
        240a060001005bd518240a060001409de418240a060001409de418240a06000380dff318240a060080dff318240a0600010d\
        00000000000000434b4572726f72446f6d61696e0200000000000000010f000000000000005061727469616c206661696c75\
        72650100000000000004400102000000000000000e0000000000000002000000000000001900000000000000010000000000\
        00000180dff318240a0600010101c018c618240a0600010900000000000000617661696c61626c650180d6b618240a060001\
        0d00000000000000434b4572726f72446f6d61696e0200000000000000010f000000000000005061727469616c206661696c\
        7572650100000000000004400102000000000000000e00000000000000020000000000000019000000000000000100000000\
        0000000180dff318240a060003000000000000000100e6bb15240a060001408b6a18240a060001c0210319240a0600010500\
        0000000000006572726f720100c7b11b240a060001006b45f2240a060000000100c7b11b240a060001006b45f2240a060001\
        408b6a18240a060001006b45f2240a06000001409de418240a0600
        """

    /// `fullRecord()`, attested, as this release writes it: 0.1.0's bytes (`deviceV1`) and the `attested` flag.
    static let deviceV1Attested = deviceV1 + "01"

    @Test("device records: the record encodes to its golden bytes (0.1.0's and the attested flag), and they decode to it")
    func deviceRecordV1() throws {
        var record = Self.fullRecord()
        record.attested = true
        #expect(hex(record.binaryEncoded()) == Self.deviceV1Attested, "the format changed: give it a new fixture (and version, if readers must)")
        #expect(try DeviceRecord(key: record.key, binary: bytes(Self.deviceV1Attested)) == record)
    }

    @Test("device records: 0.1.0's bytes, written before the attested flag, decode to the record, unattested")
    func deviceRecordFromTheReleaseBefore() throws {
        let decoded = try DeviceRecord(key: Self.fullRecord().key, binary: bytes(Self.deviceV1))
        #expect(decoded == Self.fullRecord())
        #expect(!decoded.attested)
    }

    @Test("device records: fields a later release appends are skipped, so the release before reads what it writes")
    func deviceRecordForward() throws {
        var record = Self.fullRecord()
        record.attested = true
        let later = bytes(Self.deviceV1Attested) + [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09]
        #expect(try DeviceRecord(key: record.key, binary: later) == record)
        #expect(throws: (any Error).self) { try DeviceRecord(key: record.key, binary: Array(bytes(Self.deviceV1).dropLast(3))) }
        var unknownVersion = bytes(Self.deviceV1Attested)
        unknownVersion[0] = DeviceRecord.binaryVersion + 1
        #expect(throws: (any Error).self, "a version this release does not know is refused, not misread") {
            try DeviceRecord(key: record.key, binary: unknownVersion)
        }
    }

    /// A journal entry with one of everything: a device, ids, an alert, a fleet alert, an outbox message.
    static func fullEntry() -> JournalEntry {
        var changes = StoreChanges(recordedAt: Timestamp(microseconds: 1_700_000_060_000_000))
        changes.devices = [fullRecord()]
        changes.alerts = [alert("al_golden", .syncError, .firing, device: "golden-1", at: 1_700_000_060)]
        changes.fleetAlerts = [("iCloud.com.example.notes", Timestamp(microseconds: 1_700_000_060_000_000))]
        changes.outbox = [
            OutboxMessage(
                id: "msg_golden",
                webhookId: "wh_golden",
                orderingKey: .alert(.device(DeviceKey(appId: "com.example.notes", deviceId: "golden-1"), .syncError)),
                payload: #"{"type":"alert.fired"}"#,
                createdAt: Timestamp(microseconds: 1_700_000_060_000_000),
                nextAttemptAt: Timestamp(microseconds: 1_700_000_060_000_000)
            )
        ]
        return JournalEntry(changes, ids: [(hash: 42, id: Array("0190f0e2-golden".utf8))], seq: 7)
    }

    /// `fullEntry()` as the journal's first format wrote it.
    static let journalV1 = """
        00c7b11b240a060001000000000000001100000000000000636f6d2e6578616d706c652e6e6f746573080000000000000067\
        6f6c64656e2d310f020000000000000101180000000000000069436c6f75642e636f6d2e6578616d706c652e6e6f74657301\
        0300000000000000694f5301040000000000000031382e31010300000000000000332e3200401e18240a060000c7b11b240a\
        060002005bd518240a0600005bd518240a060001005bd518240a060001409de418240a060001409de418240a06000380dff3\
        18240a060080dff318240a0600010d00000000000000434b4572726f72446f6d61696e0200000000000000010f0000000000\
        00005061727469616c206661696c7572650100000000000004400102000000000000000e0000000000000002000000000000\
        00190000000000000001000000000000000180dff318240a0600010101c018c618240a060001090000000000000061766169\
        6c61626c650180d6b618240a0600010d00000000000000434b4572726f72446f6d61696e0200000000000000010f00000000\
        0000005061727469616c206661696c7572650100000000000004400102000000000000000e00000000000000020000000000\
        0000190000000000000001000000000000000180dff318240a060003000000000000000100e6bb15240a060001408b6a1824\
        0a060001c0210319240a06000105000000000000006572726f720100c7b11b240a060001006b45f2240a060000000100c7b1\
        1b240a060001006b45f2240a060001408b6a18240a060001006b45f2240a06000001409de418240a06000100000000000000\
        2a000000000000000f0000000000000030313930663065322d676f6c64656e01000000000000000900000000000000616c5f\
        676f6c64656e090000000000000073796e634572726f720600000000000000666972696e67010800000000000000676f6c64\
        656e2d31010b00000000000000636f6d2e6578616d706c6501080000000000000069436c6f75642e7800f7101daf6a0c0000\
        0100000000000000730100000000000000640100000000000000180000000000000069436c6f75642e636f6d2e6578616d70\
        6c652e6e6f7465730100c7b11b240a060001000000000000000a000000000000006d73675f676f6c64656e09000000000000\
        0077685f676f6c64656e26000000000000006401636f6d2e6578616d706c652e6e6f74657301676f6c64656e2d310173796e\
        634572726f7216000000000000007b2274797065223a22616c6572742e6669726564227d00c7b11b240a0600000000000000\
        000000c7b11b240a0600070000000000000070656e64696e67
        """

    /// `fullEntry()` with a removal of each kind and a resolve with a reason: the second format's section.
    static func entryWithRemovals() -> JournalEntry {
        var entry = fullEntry()
        var resolved = alert("al_forgotten", .notSyncing, .resolved, device: "golden-2", at: 1_700_000_070)
        resolved.reason = .forgotten
        entry.alerts.append(resolved)
        entry.removals = [
            DeviceRemoval(key: DeviceKey(appId: "com.example.notes", deviceId: "golden-2"), reason: .forgotten),
            DeviceRemoval(key: DeviceKey(appId: "com.example.notes", deviceId: "golden-3"), reason: .erased),
        ]
        return entry
    }

    /// The second format's section of `entryWithRemovals()`, after the first format's bytes of the same entry.
    static let journalV2Section = """
        02000000000000001100000000000000636f6d2e6578616d706c652e6e6f7465730800000000000000676f6c64656e2d3209\
        00000000000000666f72676f7474656e1100000000000000636f6d2e6578616d706c652e6e6f746573080000000000000067\
        6f6c64656e2d330600000000000000657261736564010000000000000001000000000000000900000000000000666f72676f\
        7474656e
        """

    @Test("journal entries: the second format's section (removals, reasons) has golden bytes, and decodes to what was written")
    func journalEntryV2() throws {
        let entry = Self.entryWithRemovals()
        var firstFormat = entry
        firstFormat.removals = []
        firstFormat.alerts[1].reason = nil
        let bytes = entry.encoded()
        let prefix = firstFormat.encoded()
        #expect(Array(bytes.prefix(prefix.count)) == prefix, "the second format appends to the first")
        #expect(hex(Array(bytes.dropFirst(prefix.count))) == Self.journalV2Section, "the format changed: give it a new fixture")
        let decoded = try JournalEntry(seq: 7, payload: bytes)
        #expect(decoded.removals == entry.removals)
        #expect(decoded.alerts == entry.alerts)
        #expect(decoded.alerts[1].reason == .forgotten)
        #expect(decoded.encoded() == bytes)
    }

    /// `fullEntry()` as this release writes it: the journal's first format around the device's bytes as they are now
    /// (`deviceV1` and the attested flag; the length before them one more).
    static var journalV1Now: String {
        journalV1.replacingOccurrences(of: "0f02000000000000" + deviceV1, with: "1002000000000000" + deviceV1 + "00")
    }

    @Test("journal entries: the first format's golden bytes decode, and a later release's appended section is skipped")
    func journalEntryV1() throws {
        let entry = Self.fullEntry()
        #expect(Self.journalV1Now != Self.journalV1)
        #expect(hex(entry.encoded()) == Self.journalV1Now, "the format changed: give it a new fixture")
        for payload in [bytes(Self.journalV1Now), bytes(Self.journalV1Now) + [0, 0, 0, 0, 0, 0, 0, 0]] {
            let decoded = try JournalEntry(seq: 7, payload: payload)
            #expect(decoded.encoded() == entry.encoded())
            #expect(decoded.alerts == entry.alerts && decoded.outbox == entry.outbox && decoded.ids.map(\.id) == entry.ids.map(\.id))
        }
        // 0.1.0's entry, with the device as it wrote it: read after an upgrade, before the journal is folded.
        let before = try JournalEntry(seq: 7, payload: bytes(Self.journalV1))
        #expect(before.alerts == entry.alerts && before.outbox == entry.outbox && before.ids.map(\.id) == entry.ids.map(\.id))
        let device = try #require(before.devices.first)
        #expect(try DeviceRecord(key: DeviceKey(appId: device.appId, deviceId: device.deviceId), binary: device.state) == Self.fullRecord())
    }
}
