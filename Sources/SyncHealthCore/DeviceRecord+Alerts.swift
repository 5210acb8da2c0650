extension DeviceRecord {
    /// The result of evaluating the alert rules: what changed, and when to look again.
    public struct AlertEvaluation: Sendable, Equatable {
        /// Alerts that fired or resolved.
        public var transitions: [AlertTransition] = []
        /// The earliest time at which anything could change without a new event (a rule's delay expiring, or
        /// the device going silent); `nil` if nothing is pending.
        public var nextDeadline: Timestamp?
    }

    /// Evaluates every per-device rule at `now`.
    ///
    /// A pure function of (state, now): call it after each batch and again at `nextDeadline`.
    public mutating func evaluateAlerts(now: Timestamp, configuration: AlertConfiguration) -> AlertEvaluation {
        var evaluation = AlertEvaluation()
        func note(_ step: (AlertTransition?, Timestamp?)) {
            if let transition = step.0 { evaluation.transitions.append(transition) }
            if let due = step.1 { evaluation.nextDeadline = min(evaluation.nextDeadline ?? due, due) }
        }
        let m = monitor

        let errorDelay: Duration = (m.syncErrorClass?.isUrgent ?? false) ? .zero : configuration.errorAfter
        note(syncError.step(kind: .syncError, holds: m.hasSyncError, delay: errorDelay, now: now))

        note(notSyncing.step(kind: .notSyncing, holds: m.isNotSyncing, delay: configuration.notSyncingAfter, now: now))

        // A stall is one activity that stays in progress; a new activity starts a new incident.
        let running = Phase.allCases.compactMap { phase -> Timestamp? in
            if case .inProgress(let startedAt) = m[phase].state { return startedAt }
            return nil
        }.min()
        if running != stalledActivityStart {
            if running != nil, stalledActivityStart != nil {
                note(syncStalled.step(kind: .syncStalled, holds: false, delay: configuration.stalledAfter, now: now))
            }
            stalledActivityStart = running
        }
        let stalled = running != nil || (m.summary == .unknown && !m.isUnknownFromQuirk)
        note(syncStalled.step(kind: .syncStalled, holds: stalled, delay: configuration.stalledAfter, now: now))

        note(
            exportAtRisk.step(
                kind: .exportAtRisk,
                holds: m.isExportAtRisk,
                since: m.oldestPendingObservedAt,
                delay: configuration.exportAtRiskAfter,
                now: now
            )
        )

        let silentAt = lastSeenAt + configuration.silentAfter
        if now < silentAt { evaluation.nextDeadline = min(evaluation.nextDeadline ?? silentAt, silentAt) }
        return evaluation
    }
}

extension MonitorState {
    /// Local changes wait while network and account are fine, and no export has succeeded since the oldest of them.
    public var isExportAtRisk: Bool {
        guard pendingChanges > 0, network == true, account == .available else { return false }
        if case .succeeded(_, let endedAt) = export.state, let reference = oldestPendingAt ?? pendingSetAt, endedAt >= reference {
            return false
        }
        return true
    }
}
