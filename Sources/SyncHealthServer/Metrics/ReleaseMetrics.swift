import SyncHealthCore

/// The per-release series of `/metrics`, written at scrape time:
///
/// - `synchealth_release_devices{app_id, app_version, summary}`, every summary value;
/// - `synchealth_release_regression{app_id, app_version}`, 1 for an app version `GET /v1/releases` judges a
///   regression of the previous one, else 0.
///
/// Devices that reported no version count under `app_version=""`. At most `maxLabelSets` (app, version) pairs are
/// written, those with the most devices; the rest are summed under `app_id="other", app_version="other"`.
enum ReleaseMetrics {
    static func write(_ apps: [String: [String: ReleaseCounts]], minimumDevices: Int, maxLabelSets: Int, into out: inout [UInt8]) {
        var rows: [(app: String, version: String, counts: ReleaseCounts, regression: Bool)] = []
        for (app, releases) in apps {
            let findings = ReleaseRegression.evaluate(releases, minimumDevices: minimumDevices)
            for (version, counts) in releases { rows.append((app, version, counts, findings[version] != nil)) }
        }
        rows.sort { a, b in
            a.counts.counts.devices != b.counts.counts.devices
                ? a.counts.counts.devices > b.counts.counts.devices : (a.app, a.version) < (b.app, b.version)
        }
        var kept = rows.prefix(max(0, maxLabelSets)).map { $0 }
        if rows.count > maxLabelSets {
            var other = ReleaseCounts()
            for row in rows.dropFirst(maxLabelSets) { other.counts.add(row.counts.counts) }
            kept.append(("other", "other", other, false))
        }
        var text = "# HELP synchealth_release_devices Devices by app, app version and sync state summary.\n"
        text += "# TYPE synchealth_release_devices gauge\n"
        for row in kept {
            let labels = "app_id=\"\(FleetMetrics.escape(row.app))\",app_version=\"\(FleetMetrics.escape(row.version))\""
            for (summary, n) in row.counts.counts.bySummary {
                text += "synchealth_release_devices{\(labels),summary=\"\(summary.rawValue)\"} \(n)\n"
            }
        }
        text += "# HELP synchealth_release_regression 1 while an app version is broken significantly more often than the previous one.\n"
        text += "# TYPE synchealth_release_regression gauge\n"
        for row in kept where row.app != "other" {
            let labels = "app_id=\"\(FleetMetrics.escape(row.app))\",app_version=\"\(FleetMetrics.escape(row.version))\""
            text += "synchealth_release_regression{\(labels)} \(row.regression ? 1 : 0)\n"
        }
        out += Array(text.utf8)
    }
}
