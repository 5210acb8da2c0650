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
    /// Reads the account status of the app's container (`accountContainer`), if it gave one.
    var accountReader: (any AccountStatusReading)?
    /// How many reads in a row answered `couldNotDetermine`: each is read again after the next of
    /// `PlatformHooks.accountRereadDelays`.
    var undeterminedReads = 0
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

    /// Makes the account reader for the container the app gave, outside the reporter's lock, and reads the status
    /// once (at start). No container, no reader: the engines' events say what they know of the account.
    func startAccountReading() {
        guard configuration.observesNetworkAndAccount, let container = configuration.accountContainerObject?.value,
            let make = configuration.platform.makeAccountReader, let reader = make(container)
        else { return }
        let installed = shared.withLock { s -> Bool in
            guard s.sources.accountReader == nil, !s.isShutDown else { return false }
            s.sources.accountReader = reader
            return true
        }
        if installed { readAccount(with: reader) }
    }

    /// Reads the account status again, if there is a reader (on `CKAccountChanged`).
    func accountMayHaveChanged() {
        guard let reader = shared.withLock({ $0.sources.accountReader }) else { return }
        readAccount(with: reader)
    }

    private func readAccount(with reader: any AccountStatusReading) {
        reader.read { [weak self] status in
            self?.accountChanged(status)
            self?.rereadIfUndetermined(status)
        }
    }

    /// `couldNotDetermine` is often passing (the account daemon busy at launch, no network yet), and no
    /// `CKAccountChanged` may follow it: read again after a while, a few times, further apart each time.
    private func rereadIfUndetermined(_ status: AccountStatus) {
        let delays = configuration.platform.accountRereadDelays
        let delay = shared.withLock { s -> Duration? in
            guard status == .couldNotDetermine else {
                s.sources.undeterminedReads = 0
                return nil
            }
            defer { s.sources.undeterminedReads += 1 }
            return s.isShutDown ? nil : delays[safe: s.sources.undeterminedReads]
        }
        guard let delay else { return }
        Task.detached(priority: .utility) { [weak self] in
            try? await Task.sleep(for: delay)
            self?.accountMayHaveChanged()
        }
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

    /// A sync activity succeeded, so the account is available: where no container is read, the "no account" that
    /// an error told (Core Data's 134400, CKSyncEngine's sign-out) ends here, once the user signed in.
    func syncSucceeded() {
        let inferredNoAccount = shared.withLock { s in s.sources.accountReader == nil && s.sources.lastAccount == .noAccount }
        if inferredNoAccount { accountChanged(.available) }
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
