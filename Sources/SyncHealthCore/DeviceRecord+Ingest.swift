/// How far in the future a device's timestamp may be before it is clamped to the time of receipt.
public struct SkewPolicy: Hashable, Sendable {
    /// Timestamps later than receipt plus this are clamped to the time of receipt.
    public var futureTolerance: Duration = .seconds(300)

    /// The default policy: five minutes.
    public init(futureTolerance: Duration = .seconds(300)) {
        self.futureTolerance = futureTolerance
    }
}

extension DeviceRecord {
    /// What one batch did to a device.
    public struct IngestResult: Sendable, Equatable {
        /// Events that changed a slot.
        public var applied = 0
        /// Events older than their slot, ignored.
        public var stale = 0
        /// Events whose time was clamped for clock skew.
        public var clamped = 0
        /// The alert transitions the batch caused.
        public var transitions: [AlertTransition] = []
        /// When the device next needs an evaluation, if ever.
        public var nextDeadline: Timestamp?
    }

    /// Folds a batch of new (already de-duplicated) events into the device, in `occurredAt` order, then
    /// evaluates the alert rules at `now`. `attested`: whether the batch carried a valid assertion of the device's
    /// key; it becomes the device's `attested` unless one of its alerts fires. While an attested device's alert
    /// fires, a batch that is not attested changes nothing (its events count as stale): anyone holding the ingest key
    /// could otherwise resolve a genuine device's alert, on the lines that hear of attested devices only.
    public mutating func ingest(
        _ events: [DeviceEvent],
        info: DeviceInfo,
        attested: Bool = false,
        now: Timestamp,
        skew: SkewPolicy = SkewPolicy(),
        configuration: AlertConfiguration = AlertConfiguration()
    ) -> IngestResult {
        var result = IngestResult()
        let firing = !AlertKind.deviceKinds.allSatisfy { self[timer: $0].firingSince == nil }
        if firing, self.attested, !attested {
            result.stale = events.count
            return result
        }
        self.info.merge(info)
        if !firing { self.attested = attested }
        if now > lastSeenAt { lastSeenAt = now }
        let limit = now + skew.futureTolerance
        var ordered = events
        for i in ordered.indices where ordered[i].occurredAt > limit {
            ordered[i].occurredAt = now
            result.clamped += 1
        }
        if result.clamped > 0 { clockSkewDetected = true }
        // A stable sort keeps batch order for events with equal times. Most batches (every single event) come in
        // order already, and for them the sort's three arrays are skipped.
        let inOrder = ordered.indices.dropFirst().allSatisfy { ordered[$0 - 1].occurredAt <= ordered[$0].occurredAt }
        if !inOrder {
            ordered = ordered.enumerated().sorted { ($0.element.occurredAt, $0.offset) < ($1.element.occurredAt, $1.offset) }.map(\.element)
        }
        for event in ordered {
            switch monitor.apply(event, receivedAt: now) {
            case .applied: result.applied += 1
            case .stale: result.stale += 1
            }
        }
        let evaluation = evaluateAlerts(now: now, configuration: configuration)
        result.transitions = evaluation.transitions
        result.nextDeadline = evaluation.nextDeadline
        return result
    }
}
