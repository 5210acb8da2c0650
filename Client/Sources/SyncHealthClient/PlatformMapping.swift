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
    /// Reads the account status; made on first use (`syncWorked`).
    var accountReader: (any AccountStatusReading)?
    /// The containers whose `eventChangedNotification` is observed (`nil`: every container), each with the
    /// function that removes its observer.
    var observedContainers: [ObjectIdentifier?: @Sendable () -> Void] = [:]
    /// Removes the other platform observers.
    var stops: [@Sendable () -> Void] = []

    mutating func stop() {
        for stop in stops { stop() }
        for stop in observedContainers.values { stop() }
        stops = []
        observedContainers = [:]
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

    /// Reads the account status, making the reader on first use: sync has just worked in this process, so it has
    /// the iCloud entitlement, and creating a `CKContainer` cannot trap.
    func syncWorked() {
        guard configuration.observesNetworkAndAccount, let containerId = configuration.containerId,
            let make = configuration.platform.makeAccountReader
        else { return }
        let reader = shared.withLock { s -> (any AccountStatusReading)? in
            guard s.sources.accountReader == nil, !s.isShutDown else { return nil }
            let reader = make(containerId)
            s.sources.accountReader = reader
            return reader
        }
        guard let reader else { return }
        readAccount(with: reader)
    }

    /// Reads the account status again, if a reader was made (on `CKAccountChanged`).
    func accountMayHaveChanged() {
        guard let reader = shared.withLock({ $0.sources.accountReader }) else { return }
        readAccount(with: reader)
    }

    private func readAccount(with reader: any AccountStatusReading) {
        reader.read { [weak self] status in self?.accountChanged(status) }
    }

    /// Observes one container's events (every container's when `container` is `nil`), once: a second call for
    /// the same container, or any call while every container is observed, changes nothing. `start` adds the
    /// observer and returns the function that removes it.
    func observeContainer(_ container: AnyObject?, start: () -> @Sendable () -> Void) {
        let key = container.map(ObjectIdentifier.init)
        // `start` only adds an observer (it never calls back into the reporter), so it runs under the lock, and
        // two racing calls cannot both observe.
        let replaced = shared.withLock { s -> [@Sendable () -> Void] in
            let observed = s.sources.observedContainers.keys
            guard !s.isShutDown, !observed.contains(key), !observed.contains(nil) else { return [] }
            // Observing every container replaces the observers of single ones, which would record twice.
            let replaced = key == nil ? Array(s.sources.observedContainers.values) : []
            if key == nil { s.sources.observedContainers = [:] }
            s.sources.observedContainers[key] = start()
            return replaced
        }
        for stop in replaced { stop() }
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
