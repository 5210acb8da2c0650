import SyncHealthCore

/// Devices by position, in first-seen order.
///
/// The local pipeline keeps every device here; the shared pipeline builds a small one per group from the rows it
/// locked. The group planner reads it and never writes it.
///
/// Its index and arrays never move what they hold as they grow: an `Array` or `Dictionary` that doubles moves every
/// device at once, under the lock that every ingest takes.
///
/// A device that leaves (`remove`) keeps its position, marked gone, until `compacted()` builds the table again
/// without the gone ones. Positions then change, so listings page by ordinal: a device's place in first-seen
/// order, which never changes.
struct DeviceTable {
    var index = ShardedDictionary<DeviceKey, Int>()
    var records = ChunkedArray<DeviceRecord>()
    /// Each device's part of the fleet counters, as last counted.
    var contributions = ChunkedArray<FleetContribution>()
    /// Each position's ordinal, growing with the position.
    var ordinals = ChunkedArray<Int64>()
    /// Whether each position holds a device (`false` once it left).
    var present = ChunkedArray<Bool>()
    /// Every app with a device here: a lookup by device id alone tries each (apps are few, devices many).
    var appIds: Set<String> = []
    /// The ordinal the next device gets.
    var nextOrdinal: Int64 = 0
    /// Positions of devices that left.
    private(set) var removedCount = 0

    /// The number of positions, the gone ones included.
    var count: Int { records.count }
    /// The number of devices.
    var liveCount: Int { records.count - removedCount }

    /// Adds a device at the end; returns its position.
    mutating func append(_ record: DeviceRecord, contribution: FleetContribution) -> Int {
        let i = records.count
        index[record.key] = i
        records.append(record)
        contributions.append(contribution)
        ordinals.append(nextOrdinal)
        present.append(true)
        nextOrdinal += 1
        appIds.insert(record.key.appId)
        return i
    }

    /// Marks the device at `position` gone: it is no longer found by key, listed or counted.
    mutating func remove(at position: Int) {
        guard present[position] else { return }
        index[records[position].key] = nil
        present[position] = false
        // Its record's storage goes now; the position goes at the next compaction.
        records[position] = DeviceRecord(key: records[position].key, firstSeenAt: records[position].firstSeenAt)
        removedCount += 1
    }

    /// Whether gone positions are enough of the table to build it again (a quarter, and at least 1,024).
    var wantsCompaction: Bool { removedCount >= max(1_024, count / 4) }

    /// The table without its gone positions, and for each new position the old one.
    func compacted() -> (table: DeviceTable, from: [Int]) {
        var table = DeviceTable()
        table.nextOrdinal = nextOrdinal
        table.index.reserveCapacity(liveCount)
        var from: [Int] = []
        from.reserveCapacity(liveCount)
        for i in 0..<count where present[i] {
            table.index[records[i].key] = table.records.count
            table.records.append(records[i])
            table.contributions.append(contributions[i])
            table.ordinals.append(ordinals[i])
            table.present.append(true)
            table.appIds.insert(records[i].key.appId)
            from.append(i)
        }
        return (table, from)
    }

    /// The first position whose ordinal is at least `ordinal` (`count` if none).
    func position(atOrAfter ordinal: Int64) -> Int {
        var low = 0
        var high = count
        while low < high {
            let mid = (low + high) / 2
            if ordinals[mid] < ordinal { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// The devices with `deviceId`, in any app.
    func keys(deviceId: String) -> [DeviceKey] {
        appIds.sorted().map { DeviceKey(appId: $0, deviceId: deviceId) }.filter { index[$0] != nil }
    }
}
