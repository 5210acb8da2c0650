import Foundation
import SyncHealthCore
import SyncHealthStore

/// Builds alert records, with their human-readable summary and detail, from domain transitions.
enum AlertText {
    static func record(for transition: AlertTransition, device: DeviceRecord) -> AlertRecord {
        let (summary, detail) = text(transition.kind, device: device)
        return AlertRecord(
            id: AlertIdentity.id(subject: .device(device.key), kind: transition.kind, startsAt: transition.startsAt),
            kind: transition.kind,
            state: transition.change == .fire ? .firing : .resolved,
            deviceId: device.key.deviceId,
            appId: device.key.appId,
            containerId: device.info.containerId,
            startsAt: transition.startsAt,
            endsAt: transition.endsAt,
            summary: summary,
            detail: detail
        )
    }

    static func record(for transition: AlertTransition, containerId: String, counts: FleetCounts) -> AlertRecord {
        AlertRecord(
            id: AlertIdentity.id(subject: .container(containerId), kind: .fleetDegraded, startsAt: transition.startsAt),
            kind: .fleetDegraded,
            state: transition.change == .fire ? .firing : .resolved,
            deviceId: nil,
            appId: nil,
            containerId: containerId,
            startsAt: transition.startsAt,
            endsAt: transition.endsAt,
            summary: "Sync is broken on \(counts.activeBroken) of \(counts.active) active devices of \(containerId)",
            detail:
                "\(counts.activeBroken) of \(counts.active) active devices are broken (error, notSyncing or unknown); \(counts.notSyncing) are not syncing."
        )
    }

    /// A release's regression alert as it fires, with the finding.
    static func record(
        regression key: ReleaseKey,
        finding: ReleaseRegression.Finding,
        releases: [String: ReleaseCounts],
        startsAt: Timestamp
    ) -> AlertRecord {
        let counts = releases[key.version]?.counts ?? FleetCounts()
        let base = releases[finding.previous]?.counts ?? FleetCounts()
        return AlertRecord(
            id: AlertIdentity.id(subject: .release(appId: key.appId, version: key.version), kind: .releaseRegression, startsAt: startsAt),
            kind: .releaseRegression,
            state: .firing,
            deviceId: nil,
            appId: key.appId,
            containerId: nil,
            startsAt: startsAt,
            endsAt: nil,
            summary:
                "Release \(key.version) of \(key.appId) breaks sync: \(percent(finding.share)) of its active devices, against \(percent(finding.previousShare)) on \(finding.previous)",
            detail:
                "\(counts.activeBroken) of \(counts.active) active devices on \(key.version) are broken (error, notSyncing or unknown), against"
                + " \(base.activeBroken) of \(base.active) on \(finding.previous): z = \(String(format: "%.1f", finding.z)), p < 0.001."
                + " Their top errors, with what to do: GET /v1/releases?appId=\(key.appId).",
            appVersion: key.version
        )
    }

    /// A firing regression alert as it resolves: what it fired with, and the release's share now.
    static func resolved(regression alert: AlertRecord, releases: [String: ReleaseCounts], at endsAt: Timestamp) -> AlertRecord {
        var resolved = alert
        resolved.state = .resolved
        resolved.endsAt = endsAt
        let version = alert.appVersion ?? ""
        let share = releases[version]?.brokenShare.map { " (\(percent($0)) of its active devices broken now)" } ?? ""
        resolved.detail += " Resolved: \(version) is no longer broken significantly more often than the release before\(share)."
        return resolved
    }

    /// `0.6` as `60%`, `0.025` as `2.5%`.
    static func percent(_ share: Double) -> String {
        let p = share * 100
        return p >= 10 || p == p.rounded() ? "\(Int(p.rounded()))%" : String(format: "%.1f%%", p)
    }

    /// The message that tells ops an alert started flapping, and that its changes are held until it is stable.
    static func flapping(_ alert: AlertRecord, configuration: NotificationPolicy.Configuration) -> AlertRecord {
        flapping(alert, "this alert", then: "further changes are not delivered until it has been stable for", configuration: configuration)
    }

    /// A release's alert that fires flapping: told once, then held firing (`ReleaseFlapping`).
    static func flapping(regression alert: AlertRecord, configuration: NotificationPolicy.Configuration) -> AlertRecord {
        flapping(alert, "this release's alert", then: "it stays firing until the release has not been a regression for", configuration: configuration)
    }

    private static func flapping(
        _ alert: AlertRecord,
        _ subject: String,
        then: String,
        configuration: NotificationPolicy.Configuration
    ) -> AlertRecord {
        var told = alert
        let window = Int(configuration.flapWindow.secondsValue / 60)
        told.detail += " Flapping: \(subject) fired more than \(configuration.flapThreshold) times in \(window) min; \(then) \(window) min."
        return told
    }

    /// A resolve that happened because the device left the store, not because its condition ended.
    static func resolved(_ alert: AlertRecord, because reason: ResolveReason, configuration: EngineConfiguration) -> AlertRecord {
        var told = alert
        told.reason = reason
        switch reason {
        case .forgotten:
            let after =
                configuration.forgetAfter.map { duration in
                    let seconds = duration.components.seconds
                    return seconds >= 86_400 && seconds % 86_400 == 0 ? " for \(seconds / 86_400) days" : " for \(duration.configurationText)"
                } ?? ""
            told.detail += " Resolved because the device was not seen\(after) and was forgotten (SYNCHEALTH_FORGET_AFTER)."
        }
        return told
    }

    /// The firing alerts of a device, as records.
    static func firing(_ device: DeviceRecord) -> [AlertRecord] {
        device.firingAlerts.map { record(for: AlertTransition(kind: $0.kind, change: .fire, startsAt: $0.startsAt), device: device) }
    }

    static func text(_ kind: AlertKind, device: DeviceRecord) -> (String, String) {
        let m = device.monitor
        let name = "\(device.key.deviceId) (\(device.key.appId))"
        switch kind {
        case .syncError:
            let errors = [("setup", m.setupError), ("import", m.importError), ("export", m.exportError)].compactMap { phase, error in
                error.map { "\(phase): \($0.domain) \($0.code) [\($0.errorClass.rawValue)]" + ($0.message.map { " \($0)" } ?? "") }
            }
            let cls = m.syncErrorClass?.rawValue ?? "unknown"
            return ("Sync error (\(cls)) on \(name)", errors.isEmpty ? "The error has cleared." : errors.joined(separator: "; "))
        case .notSyncing:
            return ("Not syncing to iCloud on \(name)", "Setup succeeded with account and network available, but import never started.")
        case .syncStalled:
            return (
                "Sync stalled on \(name)",
                "A sync activity has stayed in progress, or the state has stayed unknown, for longer than the stall delay. Summary: \(m.summary.rawValue)."
            )
        case .exportAtRisk:
            return (
                "Export at risk on \(name)",
                "\(m.pendingChanges) local changes wait to be exported while network and account are fine, and no export has succeeded."
            )
        case .fleetDegraded:
            return ("Fleet degraded", "")
        case .releaseRegression:
            return ("Release regression", "")
        }
    }
}
