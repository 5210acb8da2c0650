import SyncHealthCore
import SyncHealthStore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthEngine

@Suite("What a replica knows between groups: when it may write first, and what a write teaches it")
struct SharedCacheTests {
    static let container = "iCloud.c"

    static func key(_ name: String) -> DeviceKey { DeviceKey(appId: "a", deviceId: name) }

    static func stored(_ name: String, version: Int64) -> StoredDevice {
        var record = DeviceRecord(key: key(name), firstSeenAt: testStart)
        record.info.containerId = container
        return StoredDevice(record: record, countedAt: testStart, version: version)
    }

    /// A read of `keys` that found `found`, with the container's counts and no fleet alert.
    static func read(_ found: [StoredDevice], devices: Int = 0) -> GroupSnapshot {
        var snapshot = GroupSnapshot()
        snapshot.devices = found
        var counts = FleetCounts()
        counts.devices = devices
        snapshot.counts = [container: counts]
        return snapshot
    }

    static func claims(_ keys: [DeviceKey]) -> [EventIdClaim] { keys.map { ($0, ["e"]) } }

    @Test("nothing is planned without a read before the first read; then known devices are planned on as read, every id as new")
    func knownDevices() {
        var cache = SharedCache(capacity: 100)
        let x = Self.key("x")
        #expect(cache.snapshot(keys: [x], claims: Self.claims([x])) == nil)
        cache.learn(Self.read([Self.stored("x", version: 4)], devices: 7), keys: [x], missing: [x])
        let snapshot = cache.snapshot(keys: [x], claims: Self.claims([x]))
        #expect(snapshot?.devices.map(\.version) == [4])
        #expect(snapshot?.seen == [[]])
        #expect(snapshot?.counts[Self.container]?.devices == 7)
        #expect(cache.knowsCounts(of: [Self.container]))
        #expect(!cache.knowsCounts(of: [Self.container, "iCloud.other"]))
    }

    @Test("a device missing here is taken as new only once reads have shown that missing devices are mostly new")
    func missingDevices() {
        var cache = SharedCache(capacity: 100)
        cache.learn(Self.read([]), keys: [], missing: [])
        let fresh = Self.key("fresh")
        // After a restart, missing devices are stored ones: read them.
        #expect(cache.snapshot(keys: [fresh], claims: Self.claims([fresh])) == nil)
        var reads = 0
        while cache.snapshot(keys: [fresh], claims: Self.claims([fresh])) == nil, reads < 100 {
            let new = Self.key("new-\(reads)")
            cache.learn(Self.read([]), keys: [new], missing: [new])
            reads += 1
        }
        #expect((10...30).contains(reads), "\(reads) reads of new devices before writing first")
        #expect(cache.snapshot(keys: [fresh], claims: Self.claims([fresh]))?.devices.isEmpty == true)
        // Missing devices turn out stored again: back to reading.
        for i in 0..<20 {
            let old = Self.key("old-\(i)")
            cache.learn(Self.read([Self.stored("old-\(i)", version: 1)]), keys: [old], missing: [old])
        }
        #expect(cache.snapshot(keys: [fresh], claims: Self.claims([fresh])) == nil)
    }

    @Test("an accepted write leaves its devices at their next version, adds its deltas to the counts, and sets its fleet alerts")
    func acceptedWrites() {
        var cache = SharedCache(capacity: 100)
        let x = Self.key("x")
        cache.learn(Self.read([Self.stored("x", version: 2)], devices: 1), keys: [x], missing: [])
        var changes = StoreChanges(recordedAt: testStart + .seconds(5))
        changes.devices = [Self.stored("x", version: 2).record, Self.stored("y", version: 0).record]
        changes.fleetAlerts = [(Self.container, testStart)]
        var deltas = FleetCounters()
        deltas.replace(
            nil,
            with: FleetContribution(appId: "a", containerId: Self.container, summary: .error, notSyncing: false, errorClass: nil, silent: false)
        )
        cache.wrote(GroupWrite(changes: changes, versions: [x: 2], fleetAlertsRead: [:], counters: deltas))
        let y = Self.key("y")
        let snapshot = cache.snapshot(keys: [x, y], claims: Self.claims([x, y]))
        #expect(snapshot?.devices.map(\.version) == [3, 1])
        #expect(snapshot?.devices.first?.countedAt == testStart + .seconds(5))
        #expect(snapshot?.counts[Self.container]?.devices == 2)
        #expect(snapshot?.counts[Self.container]?.broken == 1)
        #expect(snapshot?.fleetAlerts == [Self.container: testStart])
        // A device that only changes its summary: no device more, one broken fewer.
        var healed = FleetCounters()
        healed.replace(
            FleetContribution(appId: "a", containerId: Self.container, summary: .error, notSyncing: false, errorClass: nil, silent: false),
            with: FleetContribution(appId: "a", containerId: Self.container, summary: .succeeded, notSyncing: false, errorClass: nil, silent: false)
        )
        cache.wrote(GroupWrite(changes: StoreChanges(recordedAt: testStart), versions: [:], fleetAlertsRead: [:], counters: healed))
        let counts = cache.snapshot(keys: [], claims: [])?.counts[Self.container]
        #expect(counts?.devices == 2 && counts?.broken == 0)
        changes.fleetAlerts = [(Self.container, nil)]
        changes.devices = []
        cache.wrote(GroupWrite(changes: changes, versions: [:], fleetAlertsRead: [:], counters: FleetCounters()))
        #expect(cache.snapshot(keys: [x], claims: Self.claims([x]))?.fleetAlerts.isEmpty == true)
    }

    @Test("writes first that are often refused (replicas taking turns with devices) make groups read first, for a while")
    func refusals() {
        var cache = SharedCache(capacity: 100)
        let x = Self.key("x")
        cache.learn(Self.read([Self.stored("x", version: 1)]), keys: [x], missing: [])
        var refused = 0
        while cache.snapshot(keys: [x], claims: Self.claims([x])) != nil, refused < 100 {
            cache.wroteFirst(refused: true)
            refused += 1
        }
        #expect((1...5).contains(refused), "\(refused) refusals before reading first")
        // The conflicts stop: reading, the replica comes back to writing first within a few dozen groups.
        var reads = 0
        while cache.snapshot(keys: [x], claims: Self.claims([x])) == nil, reads < 200 {
            cache.learn(Self.read([Self.stored("x", version: 1)]), keys: [x], missing: [])
            reads += 1
        }
        #expect((5...40).contains(reads), "\(reads) reads before writing first again")
    }

    @Test("beyond its capacity the cache forgets a tenth of its devices, and reads them again; with none, every group reads")
    func capacity() {
        var cache = SharedCache(capacity: 50)
        let keys = (0..<51).map { Self.key("d\($0)") }
        cache.learn(Self.read((0..<51).map { Self.stored("d\($0)", version: 1) }), keys: keys, missing: [])
        #expect(cache.devices.count == 45)

        var none = SharedCache(capacity: 0)
        none.learn(Self.read([Self.stored("d0", version: 1)]), keys: [keys[0]], missing: [])
        #expect(none.devices.isEmpty)
        #expect(none.snapshot(keys: [], claims: []) == nil)
    }
}
