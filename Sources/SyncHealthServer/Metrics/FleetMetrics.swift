import SyncHealthCore

/// The per-app fleet series of `/metrics`, written at scrape time from the engine's counters, so that a series
/// exists exactly while its app and container have devices:
///
/// - `synchealth_fleet_devices{app_id, container_id, summary}`, every summary value;
/// - `synchealth_fleet_broken_devices`, `synchealth_fleet_not_syncing_devices` and
///   `synchealth_fleet_silent_devices{app_id, container_id}`.
///
/// Every device counts once: in its app and container, or with `container_id=""` when it reports none. At most
/// `maxLabelSets` (app, container) pairs are written, the largest; the rest are summed under `app_id="other",
/// container_id="other"`. Never a device id.
enum FleetMetrics {
    static func write(_ all: [FleetScope: FleetCounts], maxLabelSets: Int, into out: inout [UInt8]) {
        var leaves = FleetScopeSelection.leaves(all)
        leaves.sort { a, b in
            a.counts.devices != b.counts.devices
                ? a.counts.devices > b.counts.devices : (a.appId, a.containerId ?? "") < (b.appId, b.containerId ?? "")
        }
        var rows = leaves.prefix(max(0, maxLabelSets)).map { (labels: labels(app: $0.appId, container: $0.containerId ?? ""), counts: $0.counts) }
        if leaves.count > maxLabelSets {
            var other = FleetCounts()
            for leaf in leaves.dropFirst(maxLabelSets) { other.add(leaf.counts) }
            rows.append((labels(app: "other", container: "other"), other))
        }
        var text = ""
        text += "# HELP synchealth_fleet_devices Devices by app, container and sync state summary.\n"
        text += "# TYPE synchealth_fleet_devices gauge\n"
        for row in rows {
            for (summary, n) in row.counts.bySummary {
                text += "synchealth_fleet_devices{\(row.labels),summary=\"\(summary.rawValue)\"} \(n)\n"
            }
        }
        let gauges: [(name: String, help: String, value: (FleetCounts) -> Int)] = [
            ("synchealth_fleet_broken_devices", "Devices whose sync is broken, by app and container.", \.broken),
            ("synchealth_fleet_not_syncing_devices", "Devices that should be syncing and are not, by app and container.", \.notSyncing),
            ("synchealth_fleet_silent_devices", "Devices not heard from within the silence window, by app and container.", \.silent),
        ]
        for gauge in gauges {
            text += "# HELP \(gauge.name) \(gauge.help)\n# TYPE \(gauge.name) gauge\n"
            for row in rows { text += "\(gauge.name){\(row.labels)} \(gauge.value(row.counts))\n" }
        }
        out += Array(text.utf8)
    }

    static func labels(app: String, container: String) -> String {
        "app_id=\"\(escape(app))\",container_id=\"\(escape(container))\""
    }

    /// A label value as the exposition format needs it: backslash, quote and line feed escaped.
    ///
    /// Over bytes, not `Character`s: a grapheme can hide one of the three (`"\r\n"` is one `Character`, and so is
    /// a quote followed by a combining mark), and a label value that reached the scrape raw would break it whole.
    static func escape(_ value: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(value.utf8.count + 2)
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case UInt8(ascii: "\""): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\n"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            default: bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
