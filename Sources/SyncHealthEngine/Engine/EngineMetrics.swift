import Metrics
import SyncHealthCore

/// The engine's metrics, created once. Labels are bounded: never a device id.
struct EngineMetrics: Sendable {
    let eventsAccepted = Counter(label: "synchealth_events_total", dimensions: [("result", "accepted")])
    let eventsDuplicate = Counter(label: "synchealth_events_total", dimensions: [("result", "duplicate")])
    let eventsRejected = Counter(label: "synchealth_events_total", dimensions: [("result", "rejected")])
    let devices = Gauge(label: "synchealth_devices")
    /// Devices that left the store: forgotten (retention) or erased.
    let devicesForgotten = Counter(label: "synchealth_devices_removed_total", dimensions: [("reason", "forgotten")])
    let devicesErased = Counter(label: "synchealth_devices_removed_total", dimensions: [("reason", "erased")])
    let commits = Counter(label: "synchealth_store_commits_total")
    let commitFailures = Counter(label: "synchealth_store_commit_failures_total")
    /// Shared store: group writes refused because another replica wrote one of their devices first.
    let writeConflicts = Counter(label: "synchealth_store_write_conflicts_total")
    /// Shared store: groups committed in one round trip, planned on what the replica knew (no read).
    let writesFirst = Counter(label: "synchealth_store_groups_written_first_total")
    let commitDuration = Timer(label: "synchealth_store_commit_duration_seconds")
    let groupSize = Recorder(label: "synchealth_commit_group_requests", aggregate: true)
    let queueShed = Counter(label: "synchealth_ingest_shed_total")
    let transitions: [AlertKind: (fire: Counter, resolve: Counter)] = Dictionary(
        uniqueKeysWithValues: AlertKind.allCases.map { kind in
            (
                kind,
                (
                    Counter(label: "synchealth_alert_transitions_total", dimensions: [("kind", kind.rawValue), ("change", "fire")]),
                    Counter(label: "synchealth_alert_transitions_total", dimensions: [("kind", kind.rawValue), ("change", "resolve")])
                )
            )
        }
    )
    /// Every kind but `releaseRegression`, which `RegressionWatch` counts.
    let firing: [AlertKind: Gauge] = Dictionary(
        uniqueKeysWithValues: AlertKind.allCases.filter { $0 != .releaseRegression }.map { kind in
            (kind, Gauge(label: "synchealth_alerts_firing", dimensions: [("kind", kind.rawValue)]))
        }
    )
}
