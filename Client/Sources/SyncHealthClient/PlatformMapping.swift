extension AccountStatus {
    /// The status of a `CKAccountStatus` raw value (0 couldNotDetermine, 1 available, 2 restricted, 3 noAccount,
    /// 4 temporarilyUnavailable).
    public init(cloudKitRawValue raw: Int) {
        switch raw {
        case 1: self = .available
        case 2: self = .restricted
        case 3: self = .noAccount
        case 4: self = .temporarilyUnavailable
        default: self = .couldNotDetermine
        }
    }
}

/// Platform sources' state: the observers to remove at shutdown, and the last value each reported, so that
/// only changes are recorded.
struct EventSources {
    var syncEngine = SyncEngineMapping()
    var lastNetwork: Bool?
    var lastAccount: AccountStatus?
    /// Removes the platform observers.
    var stops: [@Sendable () -> Void] = []

    mutating func stop() {
        for stop in stops { stop() }
        stops = []
    }
}

extension SyncHealthReporter {
    /// Records network availability when it changed since the last report.
    public func networkChanged(available: Bool) {
        let changed = shared.withLock { s in
            defer { s.sources.lastNetwork = available }
            return s.sources.lastNetwork != available
        }
        if changed { record(.network(available: available)) }
    }

    /// Records the iCloud account status when it changed since the last report.
    public func accountChanged(_ status: AccountStatus) {
        let changed = shared.withLock { s in
            defer { s.sources.lastAccount = status }
            return s.sources.lastAccount != status
        }
        if changed { record(.account(status: status)) }
    }
}
