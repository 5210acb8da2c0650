/// Counters as named fields, so that a store can keep one row per (scope, field) and add deltas to it.
///
/// Field names are stable: `devices`, `active`, `silent`, `broken`, `activeBroken`, `notSyncing`,
/// `summary.<value>` and `errorClass.<class>`.
extension FleetCounts {
    /// Every field whose value is not zero.
    public var nonZeroFields: [(name: String, value: Int)] {
        var fields: [(String, Int)] = [
            ("devices", devices), ("active", active), ("silent", silent), ("broken", broken),
            ("activeBroken", activeBroken), ("notSyncing", notSyncing),
        ]
        for (summary, n) in bySummary { fields.append(("summary." + summary.rawValue, n)) }
        for (cls, n) in byErrorClass { fields.append(("errorClass." + cls.rawValue, n)) }
        return fields.filter { $0.1 != 0 }
    }

    /// Counts from named fields; unknown names are ignored, missing ones are zero.
    public init(fields: some Sequence<(name: String, value: Int)>) {
        self.init()
        for (name, value) in fields {
            switch name {
            case "devices": devices = value
            case "active": active = value
            case "silent": silent = value
            case "broken": broken = value
            case "activeBroken": activeBroken = value
            case "notSyncing": notSyncing = value
            default:
                if name.hasPrefix("summary."), let s = SyncStateSummary(rawValue: String(name.dropFirst(8))),
                    let i = SyncStateSummary.allCases.firstIndex(of: s)
                {
                    bySummaryCounts[i] = value
                } else if name.hasPrefix("errorClass."), let c = ErrorClass(rawValue: String(name.dropFirst(11))),
                    let i = ErrorClass.allCases.firstIndex(of: c)
                {
                    byErrorClassCounts[i] = value
                }
            }
        }
    }
}

extension FleetCounters {
    /// Every scope a `replace` touched, zero or not: started from empty counters, the deltas by scope. Cheaper
    /// than `nonZeroScopes` where zero deltas may be added.
    public var touchedScopes: [FleetScope: FleetCounts] { counts }

    /// Every scope with a non-zero field. Started from empty counters, `replace` calls leave exactly the
    /// deltas to add to stored counters.
    public var nonZeroScopes: [(scope: FleetScope, counts: FleetCounts)] {
        counts.filter { !$0.value.nonZeroFields.isEmpty }.map { ($0.key, $0.value) }
    }
}
