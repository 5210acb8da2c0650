import SyncHealthCore

/// Devices by position: a device's position never changes once it is added.
///
/// The local pipeline keeps every device here; the shared pipeline builds a small one per group from the rows it
/// locked. The group planner reads it and never writes it.
///
/// Its index and arrays never move what they hold as they grow: an `Array` or `Dictionary` that doubles moves every
/// device at once, under the lock that every ingest takes.
struct DeviceTable {
    var index = ShardedDictionary<DeviceKey, Int>()
    var records = ChunkedArray<DeviceRecord>()
    /// Each device's part of the fleet counters, as last counted.
    var contributions = ChunkedArray<FleetContribution>()
    /// Every app with a device here: a lookup by device id alone tries each (apps are few, devices many).
    var appIds: Set<String> = []

    var count: Int { records.count }

    /// Adds a device at the end; returns its position.
    mutating func append(_ record: DeviceRecord, contribution: FleetContribution) -> Int {
        let i = records.count
        index[record.key] = i
        records.append(record)
        contributions.append(contribution)
        appIds.insert(record.key.appId)
        return i
    }

    /// The devices with `deviceId`, in any app.
    func keys(deviceId: String) -> [DeviceKey] {
        appIds.sorted().map { DeviceKey(appId: $0, deviceId: deviceId) }.filter { index[$0] != nil }
    }
}
