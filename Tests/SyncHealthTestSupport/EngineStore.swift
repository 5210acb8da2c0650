import Foundation
public import Logging
public import SyncHealthEngine
import SyncHealthPostgres
import SyncHealthSQLite
import SyncHealthStore
public import Testing

/// The stores a test can run the engine over: the embedded ones (the local pipeline) and PostgreSQL (the shared one).
public enum EngineStore: String, Sendable, CustomTestStringConvertible {
    case memory, sqlite, postgres

    /// The embedded stores.
    public static var allCases: [EngineStore] { [.memory, .sqlite] }
    /// The embedded stores and, when the run has a throwaway cluster, PostgreSQL: the engine's shared path.
    public static var withShared: [EngineStore] { PostgresTesting.baseURL == nil ? allCases : allCases + [.postgres] }

    public var testDescription: String { rawValue }

    /// A new, empty store of this kind.
    public func make() async throws -> MonitorStore {
        switch self {
        case .memory: .local(InMemoryStore())
        // Generations of a second: tests shorten the retention to seconds, and the service's store would take a
        // seventh of it.
        case .sqlite: .local(try SQLiteStore(directory: temporaryDirectory(), synchronous: .normal, eventIdGeneration: .seconds(1)))
        case .postgres: .shared(try PostgresStore(url: try await PostgresTesting.freshDatabase(), logger: testLogger()))
        }
    }
}

/// A logger that prints nothing, unless SYNCHEALTH_TEST_LOGS is set.
public func testLogger() -> Logger {
    var logger = Logger(label: "test")
    logger.logLevel = ProcessInfo.processInfo.environment["SYNCHEALTH_TEST_LOGS"] == nil ? .critical : .debug
    return logger
}

extension DeliveryConfiguration {
    /// Webhooks may go to loopback and private addresses, where tests' receivers listen.
    public static var privateAllowed: DeliveryConfiguration {
        var c = DeliveryConfiguration()
        c.allowPrivate = true
        return c
    }
}
