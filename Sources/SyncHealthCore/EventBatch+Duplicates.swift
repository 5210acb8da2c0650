extension Array where Element == DeviceEvent {
    /// Splits events into those not seen before and the number of duplicates, given the ids already recorded
    /// for the device. A repeat within the batch is a duplicate too.
    public func removingDuplicates(alreadySeen: (String) -> Bool) -> (fresh: [DeviceEvent], duplicates: Int) {
        if count == 1, let event = first { return alreadySeen(event.eventId) ? ([], 1) : ([event], 0) }
        var fresh: [DeviceEvent] = []
        fresh.reserveCapacity(count)
        var inBatch = Set<String>(minimumCapacity: count)
        var duplicates = 0
        for event in self {
            if alreadySeen(event.eventId) || !inBatch.insert(event.eventId).inserted {
                duplicates += 1
            } else {
                fresh.append(event)
            }
        }
        return (fresh, duplicates)
    }
}
