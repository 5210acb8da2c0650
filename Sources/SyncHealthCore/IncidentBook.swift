/// Groups device alerts into incidents and decides what to tell ops about them, as Alertmanager's `group_wait` and
/// `group_interval` do: an incident is told once it has been open for `groupWait`, again at most every
/// `groupInterval` while its device count changes, and once more when its last device recovers (an incident that
/// resolves before it was told is never told).
///
/// Flapping is judged per incident key, with the thresholds of device alerts (`NotificationPolicy.Configuration`):
/// an incident whose key had already opened (and been told) `flapThreshold` times within `flapWindow` is told once,
/// marked flapping, and then held open: it sends no updates, its devices may recover and break again within it, and
/// it resolves once they have been quiet for a whole window. So a page opened for a flapping key stays one page, and
/// its resolve comes when the key has settled.
///
/// A value with no I/O: `step` takes the open incidents as stored, the recent ones, and the firing alerts as counted
/// now, and returns the records to write and the notices to deliver; the caller writes both in one transaction.
public enum IncidentBook {
    /// Delays.
    public struct Configuration: Sendable, Equatable {
        /// How long an incident is open before its first message, so that its devices gather.
        public var groupWait: Duration = .seconds(30)
        /// Least time between two messages about one incident.
        public var groupInterval: Duration = .seconds(300)

        /// The defaults: 30 s and 5 min.
        public init() {}
    }

    /// Devices a record and a message name, at most.
    public static let sampleSize = 5

    /// Points an incident's history keeps, at most: enough for a sparkline.
    public static let historyLimit = 48

    /// What a message says about an incident.
    public enum Notice: String, Sendable, Hashable {
        case opened
        case updated
        case resolved
    }

    /// What one step decided.
    public struct Step: Sendable {
        /// Records to write, each with its `revision` one above the one read (1 for a new incident).
        public var records: [IncidentRecord] = []
        /// Messages to deliver, in order, each with the record as written.
        public var notices: [(notice: Notice, record: IncidentRecord)] = []
        /// When `step` next has something to decide, if the counts do not change before.
        public var nextWake: Timestamp?
    }

    /// One step at `now`.
    ///
    /// - Parameters:
    ///   - open: the open incidents, as stored.
    ///   - recent: incidents that opened within the last `flapping.flapWindow`, in any state (those in `open` may be
    ///     among them): how often a key opened lately. Only needed when a key in `groups` has no open incident.
    ///   - groups: the firing device alerts now, by incident key.
    ///   - flapping: when a key is flapping.
    ///   - held: whether a silence holds an incident's messages now. A held opening or update is not told, and is
    ///     tried again at the next step, so that it is told with what the incident holds once the silence ends; a
    ///     resolve is never held, since those told of an incident must hear that it ended.
    public static func step(
        open: [IncidentRecord],
        recent: [IncidentRecord] = [],
        groups: [IncidentKey: IncidentGroup],
        now: Timestamp,
        configuration: Configuration,
        flapping: NotificationPolicy.Configuration = NotificationPolicy.Configuration(),
        held: (IncidentRecord) -> Bool = { _ in false }
    ) -> Step {
        var step = Step()
        let openKeys = Set(open.map(\.key))
        let told = toldOpens(recent, since: now - flapping.flapWindow)
        var wakes: [Timestamp] = []
        for var record in open.sorted(by: { $0.key < $1.key }) {
            let before = record
            var notice: Notice?
            if let group = groups[record.key] {
                record.quietSince = nil
                record.devices = group.devices
                record.peakDevices = max(record.peakDevices, group.devices)
                record.byVersion = group.byVersion
                record.samples = Array(group.samples.prefix(sampleSize))
                if record.messages == 0 {
                    let due = record.openedAt + configuration.groupWait
                    if now < due { wakes.append(due) } else if !held(record) { notice = .opened }
                } else if record.flappingSince == nil, record.devices != record.notifiedDevices {
                    let due = (record.notifiedAt ?? now) + configuration.groupInterval
                    if now < due { wakes.append(due) } else if !held(record) { notice = .updated }
                }
            } else if record.flappingSince != nil, record.messages > 0, now < (record.quietSince ?? now) + flapping.flapWindow {
                // Held open: it resolves once its devices have been quiet for a window.
                record.quietSince = record.quietSince ?? now
                record.devices = 0
                record.byVersion = [:]
                wakes.append((record.quietSince ?? now) + flapping.flapWindow)
            } else {
                record.state = .resolved
                record.resolvedAt = record.quietSince ?? now
                record.devices = 0
                record.byVersion = [:]
                if record.messages > 0 { notice = .resolved }
            }
            if notice == .opened { markFlapping(&record, told: told, now: now, threshold: flapping.flapThreshold) }
            if let notice { tell(&record, notice, now: now) }
            if record.devices != before.devices { record.record(now: now) }
            guard record != before else { continue }
            record.revision = before.revision + 1
            step.append(record, notice)
        }
        for (key, group) in groups.sorted(by: { $0.key < $1.key }) where !openKeys.contains(key) {
            let openedAt = min(group.since ?? now, now)
            var record = IncidentRecord(
                id: IncidentRecord.id(key: key, openedAt: openedAt),
                key: key,
                openedAt: openedAt,
                devices: group.devices,
                peakDevices: group.devices,
                byVersion: group.byVersion,
                samples: Array(group.samples.prefix(sampleSize)),
                history: [IncidentPoint(at: now, devices: group.devices)],
                revision: 1
            )
            let due = openedAt + configuration.groupWait
            var notice: Notice?
            if now < due {
                wakes.append(due)
            } else if !held(record) {
                notice = .opened
                markFlapping(&record, told: told, now: now, threshold: flapping.flapThreshold)
                tell(&record, .opened, now: now)
            }
            step.append(record, notice)
        }
        step.nextWake = wakes.min()
        return step
    }

    /// The ids of the incidents told opened since `since`, by key.
    static func toldOpens(_ recent: [IncidentRecord], since: Timestamp) -> [IncidentKey: Set<String>] {
        var told: [IncidentKey: Set<String>] = [:]
        for record in recent where record.messages > 0 && record.openedAt >= since {
            told[record.key, default: []].insert(record.id)
        }
        return told
    }

    /// Marks `record`, about to be told opened, flapping if its key was told opened `threshold` times already.
    private static func markFlapping(_ record: inout IncidentRecord, told: [IncidentKey: Set<String>], now: Timestamp, threshold: Int) {
        let before = told[record.key, default: []].subtracting([record.id]).count
        if before + 1 > threshold { record.flappingSince = now }
    }

    private static func tell(_ record: inout IncidentRecord, _ notice: Notice, now: Timestamp) {
        record.messages += 1
        record.notifiedAt = now
        record.notifiedDevices = record.devices
    }
}

extension IncidentBook.Step {
    mutating func append(_ record: IncidentRecord, _ notice: IncidentBook.Notice?) {
        records.append(record)
        if let notice { notices.append((notice, record)) }
    }
}

extension IncidentRecord {
    /// Adds its count now to its history; past `IncidentBook.historyLimit` points, every other older point goes, so
    /// the history spans the whole incident at a coarser grain.
    mutating func record(now: Timestamp) {
        history.append(IncidentPoint(at: now, devices: devices))
        guard history.count > IncidentBook.historyLimit, let last = history.last else { return }
        history = history.dropLast().enumerated().filter { $0.offset.isMultiple(of: 2) }.map(\.element) + [last]
    }
}
