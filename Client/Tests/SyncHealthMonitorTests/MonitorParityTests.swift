import SyncHealthMonitorTestKit
import Testing

@testable import SyncHealthMonitor

@Suite("Part 1 parity: summary table rows")
struct SummaryRowTests {
    struct Row: Sendable, CustomTestStringConvertible {
        let summary: SyncStateSummary
        let broken: Bool
        let symbol: String
        let color: String
        let text: String
        var testDescription: String { summary.rawValue }
    }

    static let rows: [Row] = [
        Row(summary: .noNetwork, broken: false, symbol: "bolt.horizontal.icloud", color: "gray", text: "No network available"),
        Row(summary: .accountNotAvailable, broken: false, symbol: "lock.icloud", color: "gray", text: "No iCloud account"),
        Row(summary: .error, broken: true, symbol: "exclamationmark.icloud", color: "red", text: "Error"),
        Row(summary: .notSyncing, broken: true, symbol: "xmark.icloud", color: "red", text: "Not syncing to iCloud"),
        Row(summary: .notStarted, broken: false, symbol: "bolt.horizontal.icloud", color: "gray", text: "Sync not started"),
        Row(summary: .inProgress, broken: false, symbol: "arrow.clockwise.icloud", color: "gray", text: "Syncing..."),
        Row(summary: .succeeded, broken: false, symbol: "icloud", color: "green", text: "Synced with iCloud"),
        Row(summary: .unknown, broken: true, symbol: "icloud.slash", color: "red", text: "Error"),
    ]

    @Test("each summary value has the spec's isBroken, symbol, colour and description", arguments: rows)
    func presentation(row: Row) {
        #expect(row.summary.isBroken == row.broken)
        #expect(row.summary.symbolName == row.symbol)
        #expect(row.summary.symbolColor == row.color)
        #expect(row.summary.description == row.text)
    }

    @Test("rule 1: network false gives noNetwork, even with an account problem and an error")
    func noNetwork() {
        var f = EventFactory()
        let m = fold([f.account(.noAccount, at: t(0)), f.failed(.import, at: t(1), error: ckQuota), f.network(false, at: t(2))])
        #expect(m.summary == .noNetwork)
        #expect(!m.hasSyncError)
    }

    @Test("rule 2: a known account status other than available gives accountNotAvailable, before errors")
    func accountNotAvailable() {
        for status in AccountStatus.allCases where status != .available {
            var f = EventFactory()
            let m = fold([f.network(true, at: t(0)), f.account(status, at: t(0)), f.failed(.export, at: t(1), error: ckQuota)])
            #expect(m.summary == .accountNotAvailable, "\(status)")
            #expect(m.hasSyncError)
        }
    }

    @Test("rule 3: a visible error gives error")
    func error() {
        var f = EventFactory()
        let m = fold(healthy(&f) + [f.failed(.export, at: t(10), error: ckNetworkFailure)])
        #expect(m.summary == .error)
        #expect(m.exportError == ckNetworkFailure)
        #expect(m.summary.isBroken)
    }

    @Test("rule 4: setup succeeded with account and network fine but import not started gives notSyncing")
    func notSyncing() {
        var f = EventFactory()
        let m = fold([f.account(.available, at: t(0)), f.network(true, at: t(0)), f.succeeded(.setup, at: t(1))])
        #expect(m.shouldBeSyncing)
        #expect(m.isNotSyncing)
        #expect(m.summary == .notSyncing)
    }

    @Test("rule 5: nothing started gives notStarted, also when network and account are unknown")
    func notStarted() {
        #expect(MonitorState().summary == .notStarted)
        var f = EventFactory()
        #expect(fold([f.account(.available, at: t(0)), f.network(true, at: t(0))]).summary == .notStarted)
    }

    @Test("rule 6: any phase in progress gives inProgress", arguments: Phase.allCases)
    func inProgress(phase: Phase) {
        var f = EventFactory()
        var events = healthy(&f)
        events.append(f.started(phase, at: t(10)))
        let m = fold(events)
        #expect(m.summary == .inProgress)
        #expect(m.isInProgress)
    }

    @Test("rule 7: import and export succeeded gives succeeded, whatever setup is")
    func succeeded() {
        var f = EventFactory()
        #expect(fold(healthy(&f)).summary == .succeeded)
        var g = EventFactory()
        // Setup never reported: still succeeded, since setup is ignored by rule 7.
        #expect(fold([g.network(true, at: t(0)), g.succeeded(.import, at: t(1)), g.succeeded(.export, at: t(2))]).summary == .succeeded)
    }

    @Test("rule 8: anything else gives unknown")
    func unknown() {
        var f = EventFactory()
        // Export succeeded, import never ran, setup succeeded but account unknown.
        let m = fold([f.network(true, at: t(0)), f.succeeded(.setup, at: t(1)), f.succeeded(.export, at: t(2))])
        #expect(m.summary == .unknown)
        #expect(m.summary.isBroken)
    }
}

@Suite("Part 1 parity: derived values and quirks")
struct DerivedValueTests {
    @Test("phase errors are hidden while the network is false or unknown")
    func errorsHiddenWithoutNetwork() {
        var f = EventFactory()
        let failed = [f.succeeded(.setup, at: t(0)), f.failed(.import, at: t(1), error: ckNetworkFailure)]
        var m = fold(failed)
        #expect(m.importError == nil)
        #expect(!m.hasSyncError)
        m.apply(f.network(false, at: t(2)), receivedAt: t(2))
        #expect(m.importError == nil)
        m.apply(f.network(true, at: t(3)), receivedAt: t(3))
        #expect(m.importError == ckNetworkFailure)
        #expect(m.setupError == nil && m.exportError == nil)
        #expect(m.hasSyncError)
    }

    @Test("a new inProgress clears the phase's failure, lastSyncError stays")
    func newActivityClearsFailure() {
        var f = EventFactory()
        var m = fold(healthy(&f) + [f.failed(.export, at: t(10), error: ckQuota)])
        #expect(m.hasSyncError)
        m.apply(f.started(.export, at: t(11)), receivedAt: t(11))
        #expect(!m.hasSyncError)
        #expect(m.export.state == .inProgress(startedAt: t(11)))
        #expect(m.lastSyncError == ckQuota)
        m.apply(f.succeeded(.export, at: t(12)), receivedAt: t(12))
        #expect(m.summary == .succeeded)
        #expect(m.lastSyncError == ckQuota, "lastSyncError is sticky")
    }

    @Test("lastSyncError is the most recent error of any phase")
    func lastSyncErrorMostRecent() {
        var f = EventFactory()
        let m = fold([f.failed(.import, at: t(5), error: ckQuota), f.failed(.export, at: t(3), error: ckBadContainer)])
        #expect(m.lastSyncError == ckQuota)
    }

    @Test("an ended event without startedAt or endedAt defaults both to occurredAt, whatever ran before")
    func endedDefaults() {
        var f = EventFactory()
        let m = fold([f.started(.import, at: t(1)), f.succeeded(.import, at: t(4))])
        #expect(m.importPhase.state == .succeeded(startedAt: t(4), endedAt: t(4)))
        let explicit = f.make(t(9), .activity(.init(phase: .export, state: .failed, startedAt: t(7), endedAt: t(8), error: ckQuota)))
        #expect(fold([explicit]).export.state == .failed(startedAt: t(7), endedAt: t(8), error: ckQuota))
    }

    @Test("shouldBeSyncing needs account available, network true, no error and setup succeeded")
    func shouldBeSyncing() {
        var f = EventFactory()
        let base = [f.account(.available, at: t(0)), f.network(true, at: t(0)), f.succeeded(.setup, at: t(1))]
        #expect(fold(base).shouldBeSyncing)
        #expect(!fold(base + [f.account(.restricted, at: t(2))]).shouldBeSyncing)
        #expect(!fold(base + [f.network(false, at: t(2))]).shouldBeSyncing)
        #expect(!fold(base + [f.failed(.export, at: t(2), error: ckQuota)]).shouldBeSyncing)
        #expect(!fold(base + [f.started(.setup, at: t(2))]).shouldBeSyncing)
        #expect(!fold([f.network(true, at: t(0)), f.succeeded(.setup, at: t(1))]).shouldBeSyncing, "account unknown")
        // Import started: no longer notSyncing.
        #expect(!fold(base + [f.started(.import, at: t(2))]).isNotSyncing)
    }

    @Test("quirk: import succeeded and no export yet is unknown, and counts as a quirk")
    func quirkImportWithoutExport() {
        var f = EventFactory()
        let m = fold([f.account(.available, at: t(0)), f.network(true, at: t(0)), f.succeeded(.setup, at: t(1)), f.succeeded(.import, at: t(2))])
        #expect(m.summary == .unknown)
        #expect(m.isUnknownFromQuirk)
    }

    @Test("quirk: a phase failed without an error is unknown")
    func quirkFailureWithoutError() {
        var f = EventFactory()
        let m = fold(healthy(&f) + [f.failed(.export, at: t(10), error: nil)])
        #expect(!m.hasSyncError)
        #expect(m.summary == .unknown)
        #expect(m.isUnknownFromQuirk)
    }

    @Test("quirk: a failure while the network is unknown is unknown")
    func quirkFailureNetworkUnknown() {
        var f = EventFactory()
        let m = fold([
            f.account(.available, at: t(0)), f.succeeded(.setup, at: t(1)), f.succeeded(.import, at: t(2)),
            f.failed(.export, at: t(3), error: ckQuota),
        ])
        #expect(m.network == nil)
        #expect(m.summary == .unknown)
        #expect(m.isUnknownFromQuirk)
    }

    @Test("quirk: setup failed while import and export never started is unknown")
    func quirkSetupFailed() {
        var f = EventFactory()
        let m = fold([f.account(.available, at: t(0)), f.network(true, at: t(0)), f.failed(.setup, at: t(1), error: nil)])
        #expect(m.summary == .unknown)
        #expect(!m.isNotSyncing)
        #expect(m.isUnknownFromQuirk)
    }
}
