import SyncHealthCore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthStore

@Suite("History store conformance: every SyncStore keeps fleet history alike")
struct HistoryStoreConformanceTests {
    static func counts(devices: Int, broken: Int) -> FleetCounts {
        var c = FleetCounts()
        c.devices = devices
        c.active = devices
        c.broken = broken
        c.bySummaryCounts[0] = devices
        return c
    }

    @Test("points read back by scope and range, oldest first, counters whole", arguments: StoreKind.allCases)
    func roundTrip(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let app = FleetScope(appId: "app.one")
            let pair = FleetScope(appId: "app.one", containerId: "iCloud.x")
            let points = (0..<5).flatMap { i in
                [
                    HistoryPoint(at: t0 + .seconds(60 * i), scope: .all, counts: Self.counts(devices: 10 + i, broken: i)),
                    HistoryPoint(at: t0 + .seconds(60 * i), scope: app, counts: Self.counts(devices: 5, broken: 1)),
                    HistoryPoint(at: t0 + .seconds(60 * i), scope: pair, counts: Self.counts(devices: 4, broken: 0)),
                ]
            }
            try await store.recordHistory(points.reversed(), resolution: .minute)
            let all = try await store.history(.all, resolution: .minute, from: t0 + .seconds(60), to: t0 + .seconds(180))
            #expect(all.map(\.at) == [t0 + .seconds(60), t0 + .seconds(120), t0 + .seconds(180)])
            #expect(
                all.map(\.counts) == [Self.counts(devices: 11, broken: 1), Self.counts(devices: 12, broken: 2), Self.counts(devices: 13, broken: 3)]
            )
            #expect(try await store.history(pair, resolution: .minute, from: t0, to: t0 + .seconds(600)).count == 5)
            #expect(try await store.history(FleetScope(containerId: "iCloud.x"), resolution: .minute, from: t0, to: t0 + .seconds(600)).isEmpty)
            #expect(try await store.history(.all, resolution: .hour, from: t0, to: t0 + .seconds(600)).isEmpty)
        }
    }

    @Test("a slot already written keeps its first point, so replicas and repeated samples write it once", arguments: StoreKind.allCases)
    func firstPointWins(kind: StoreKind) async throws {
        try await kind.withStore { store in
            try await store.recordHistory([HistoryPoint(at: t0, scope: .all, counts: Self.counts(devices: 1, broken: 0))], resolution: .hour)
            try await store.recordHistory([HistoryPoint(at: t0, scope: .all, counts: Self.counts(devices: 9, broken: 9))], resolution: .hour)
            let points = try await store.history(.all, resolution: .hour, from: t0, to: t0)
            #expect(points.map(\.counts) == [Self.counts(devices: 1, broken: 0)])
        }
    }

    @Test("pruning forgets one resolution's points before the cutoff only", arguments: StoreKind.allCases)
    func prune(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let points = (0..<4).map { HistoryPoint(at: t0 + .seconds(60 * $0), scope: .all, counts: Self.counts(devices: $0 + 1, broken: 0)) }
            try await store.recordHistory(points, resolution: .minute)
            try await store.recordHistory(points, resolution: .hour)
            try await store.pruneHistory(.minute, before: t0 + .seconds(120))
            #expect(
                try await store.history(.all, resolution: .minute, from: t0, to: t0 + .seconds(600)).map(\.at) == [
                    t0 + .seconds(120), t0 + .seconds(180),
                ]
            )
            #expect(try await store.history(.all, resolution: .hour, from: t0, to: t0 + .seconds(600)).count == 4)
        }
    }

    @Test("counts survive their stored form, every field")
    func encodedFields() {
        var c = FleetCounts()
        c.devices = 7
        c.active = 5
        c.silent = 2
        c.broken = 3
        c.activeBroken = 2
        c.notSyncing = 1
        c.bySummaryCounts = Array(1...c.bySummaryCounts.count)
        c.byErrorClassCounts = Array(repeating: 4, count: c.byErrorClassCounts.count)
        #expect(FleetCounts(encodedFields: c.encodedFields) == c)
        #expect(FleetCounts(encodedFields: "") == FleetCounts())
        // The stored form is fixed: points written today must read back the same later.
        #expect(c.encodedFields == "7,5,2,3,2,1,1,2,3,4,5,6,7,8,4,4,4,4,4,4")
        var few = FleetCounts()
        few.devices = 3
        few.broken = 1
        #expect(few.encodedFields == "3,0,0,1")
    }

    @Test("slots round down to whole minutes and hours, before 1970 too")
    func slots() {
        #expect(HistoryResolution.minute.slot(Timestamp(microseconds: 119_999_999)) == Timestamp(microseconds: 60_000_000))
        #expect(HistoryResolution.hour.slot(Timestamp(microseconds: 7_199_000_000)) == Timestamp(microseconds: 3_600_000_000))
        #expect(HistoryResolution.minute.slot(Timestamp(microseconds: -1)) == Timestamp(microseconds: -60_000_000))
    }
}
