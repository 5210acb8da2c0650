import SyncHealthCore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthStore

@Suite("Store conformance: incidents")
struct IncidentStoreConformanceTests {
    static func record(
        _ code: Int,
        app: String = "app",
        revision: Int = 1,
        state: IncidentState = .open,
        devices: Int = 3,
        attestedOnly: Bool = false
    ) -> IncidentRecord {
        let key = IncidentKey(
            appId: app,
            containerId: "iCloud.c",
            kind: .syncError,
            signature: ErrorSignature(domain: "CKErrorDomain", code: code),
            attestedOnly: attestedOnly
        )
        return IncidentRecord(
            id: IncidentRecord.id(key: key, openedAt: t0),
            key: key,
            state: state,
            openedAt: t0,
            resolvedAt: state == .resolved ? t0 + .seconds(9) : nil,
            devices: devices,
            peakDevices: devices,
            byVersion: ["2.0": devices],
            samples: ["d1", "d2"],
            notifiedAt: t0 + .seconds(30),
            notifiedDevices: devices,
            messages: 1,
            history: [IncidentPoint(at: t0, devices: 1), IncidentPoint(at: t0 + .seconds(2), devices: devices)],
            revision: revision
        )
    }

    @Test(
        "an incident of attested devices is its own, beside the one of every device: both open, listed only when asked",
        arguments: StoreKind.allCases
    )
    func attestedPopulation(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let every = Self.record(5, devices: 4)
            var attested = Self.record(5, devices: 1, attestedOnly: true)
            #expect(every.id != attested.id && every.key.identity != attested.key.identity)
            try await store.saveIncidents([every, attested], messages: [])
            #expect(Set(try await store.openIncidents()) == [every, attested], "one open incident of each population")
            #expect(try await store.incident(id: attested.id) == attested)
            #expect(try await store.incidents(IncidentQuery()).incidents == [every], "the list shows incidents of every device unless asked")
            #expect(try await store.incidents(IncidentQuery(attestedOnly: true)).incidents == [attested])
            #expect(try await store.incidents(IncidentQuery(attestedOnly: nil)).incidents.count == 2)
            attested.devices = 2
            attested.revision = 2
            try await store.saveIncidents([attested], messages: [])
            #expect(try await store.incident(id: attested.id) == attested, "an update keeps its population")
            await #expect(throws: IncidentStoreError.self, "a second open incident of the attested key is refused") {
                var again = Self.record(5, devices: 1, attestedOnly: true)
                again.id = "in_again"
                try await store.saveIncidents([again], messages: [])
            }
        }
    }

    @Test("a new incident and its messages are written together, read back whole, and listed newest first", arguments: StoreKind.allCases)
    func writeAndRead(kind: StoreKind) async throws {
        try await kind.withStore { store in
            try await store.saveWebhook(subscription())
            let first = Self.record(5)
            try await store.saveIncidents([first, Self.record(25, app: "other")], messages: [message("m1", line: "A"), message("m2", line: "B")])
            #expect(try await store.incident(id: first.id) == first)
            #expect(try await store.openIncidents().map(\.id) == [first.id, Self.record(25, app: "other").id])
            #expect(Set(try await store.dueMessages(now: t0, limit: 10).map(\.id)) == ["m1", "m2"])

            var held = first
            held.flappingSince = t0 + .seconds(30)
            held.quietSince = t0 + .seconds(45)
            held.devices = 0
            held.revision = 2
            try await store.saveIncidents([held], messages: [])
            #expect(try await store.incident(id: first.id) == held, "a flapping incident held open reads back with both times")

            var resolved = held
            resolved.state = .resolved
            resolved.resolvedAt = t0 + .seconds(60)
            resolved.messages = 2
            resolved.revision = 3
            try await store.saveIncidents([resolved], messages: [message("m3"), message("m1")])
            #expect(try await store.incident(id: first.id) == resolved)
            #expect(try await store.openIncidents().map(\.key.appId) == ["other"])

            let page = try await store.incidents(IncidentQuery(limit: 1))
            #expect(page.incidents.map(\.key.appId) == ["other"], "newest first")
            let next = try await store.incidents(IncidentQuery(limit: 1, cursor: page.nextCursor))
            #expect(next.incidents.map(\.id) == [first.id] && next.nextCursor == nil)
            #expect(try await store.incidents(IncidentQuery(state: .resolved)).incidents.map(\.id) == [first.id])
            #expect(try await store.incidents(IncidentQuery(appId: "other")).incidents.count == 1)
            #expect(try await store.incidents(IncidentQuery(kind: .notSyncing)).incidents.isEmpty)
        }
    }

    @Test(
        "an erased device leaves the samples of its app's incidents, open or resolved; each moves to its next revision",
        arguments: StoreKind.allCases
    )
    func removeSample(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let open = Self.record(5)
            var resolved = Self.record(6, state: .resolved)
            resolved.samples = ["d_1", "d2"]
            let other = Self.record(7, app: "other")
            let similar = Self.record(8)
            var withSimilar = similar
            withSimilar.samples = ["dx1"]
            try await store.saveIncidents([open, resolved, other, withSimilar], messages: [])
            try await store.removeSample(DeviceKey(appId: "app", deviceId: "d1"))
            let after = try await store.incident(id: open.id)
            #expect(after?.samples == ["d2"])
            #expect(after?.revision == open.revision + 1)
            #expect(try await store.incident(id: resolved.id)?.samples == ["d_1", "d2"], "an id that only looks alike stays")
            #expect(try await store.incident(id: other.id)?.samples == ["d1", "d2"], "another app's device of the same id stays")
            try await store.removeSample(DeviceKey(appId: "app", deviceId: "d_1"))
            #expect(try await store.incident(id: resolved.id)?.samples == ["d2"], "a resolved incident's samples too")
            #expect(try await store.incident(id: similar.id)?.samples == ["dx1"], "`_` is not a wildcard here")
            #expect(try await store.incident(id: similar.id)?.revision == 1, "an incident without the device is not written")
            var stale = open
            stale.devices = 1
            stale.revision = open.revision + 1
            await #expect(throws: IncidentStoreError.conflict, "a step planned before the removal is refused") {
                try await store.saveIncidents([stale], messages: [])
            }
        }
    }

    @Test("a write planned on a stale revision, or a second open incident of one key, is refused whole", arguments: StoreKind.allCases)
    func conflicts(kind: StoreKind) async throws {
        try await kind.withStore { store in
            try await store.saveWebhook(subscription())
            let first = Self.record(5)
            try await store.saveIncidents([first], messages: [])
            var ahead = first
            ahead.revision = 3
            await #expect(throws: IncidentStoreError.conflict) {
                try await store.saveIncidents([Self.record(25), ahead], messages: [message("lost")])
            }
            #expect(try await store.openIncidents().map(\.id) == [first.id], "the new incident before the stale one is rolled back")
            #expect(try await store.dueMessages(now: t0, limit: 10).isEmpty, "and so are the messages")

            // Another replica opened the same key at another time.
            var twin = Self.record(5)
            twin.openedAt = t0 + .seconds(1)
            twin.id = IncidentRecord.id(key: twin.key, openedAt: twin.openedAt)
            await #expect(throws: IncidentStoreError.conflict) { try await store.saveIncidents([twin], messages: []) }
            await #expect(throws: IncidentStoreError.conflict) { try await store.saveIncidents([first], messages: []) }
        }
    }
}

extension IncidentStoreConformanceTests {
    static func releaseAlert(_ version: String, startsAt: Timestamp = t0, state: AlertState = .firing) -> AlertRecord {
        AlertRecord(
            id: "regression-\(version)-\(startsAt.microseconds)",
            kind: .releaseRegression,
            state: state,
            deviceId: nil,
            appId: "app",
            containerId: nil,
            startsAt: startsAt,
            endsAt: state == .resolved ? startsAt + .seconds(60) : nil,
            summary: "Release \(version) breaks sync",
            detail: "detail",
            appVersion: version
        )
    }

    @Test(
        "a release alert fires once per release, whichever writer tries second; its resolve only replaces a firing row; messages go with it",
        arguments: StoreKind.allCases
    )
    func releaseAlerts(kind: StoreKind) async throws {
        try await kind.withStore { store in
            try await store.saveWebhook(subscription())
            let fired = Self.releaseAlert("2.0")
            try await store.saveReleaseAlerts([fired], messages: [message("m1", line: "r")])
            let firing = try await store.alerts(AlertQuery(state: .firing, kind: .releaseRegression))
            #expect(firing.alerts == [fired], "read back whole, with its release")

            // Another writer, judging the same change at another time: refused, and nothing of it is written.
            let late = Self.releaseAlert("2.0", startsAt: t0 + .seconds(5))
            await #expect(throws: IncidentStoreError.conflict) {
                try await store.saveReleaseAlerts([Self.releaseAlert("2.1"), late], messages: [message("m2", line: "r2")])
            }
            #expect(try await store.alerts(AlertQuery(kind: .releaseRegression)).alerts.map(\.id) == [fired.id], "2.1 rolled back with it")
            #expect(Set(try await store.dueMessages(now: t0, limit: 10).map(\.id)) == ["m1"])

            var resolved = fired
            resolved.state = .resolved
            resolved.endsAt = t0 + .seconds(60)
            resolved.detail += " Resolved."
            try await store.saveReleaseAlerts([resolved], messages: [message("m3", line: "r")])
            #expect(try await store.alerts(AlertQuery(kind: .releaseRegression)).alerts == [resolved])
            await #expect(throws: IncidentStoreError.conflict, "resolved already") {
                try await store.saveReleaseAlerts([resolved], messages: [])
            }
            // Resolved, the release may fire again.
            let again = Self.releaseAlert("2.0", startsAt: t0 + .seconds(120))
            try await store.saveReleaseAlerts([again], messages: [])
            #expect(try await store.alerts(AlertQuery(state: .firing, kind: .releaseRegression)).alerts == [again])
        }
    }
}
