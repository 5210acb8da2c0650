import Foundation
import Logging
import NIOPosix
public import PostgresNIO

/// The throwaway PostgreSQL cluster that `scripts/test` starts (`scripts/postgres`), and fresh databases on it.
public enum PostgresTesting {
    /// `SYNCHEALTH_TEST_POSTGRES_URL`, or `nil` when no cluster was started for this run.
    public static var baseURL: String? {
        ProcessInfo.processInfo.environment["SYNCHEALTH_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Whether this run must test PostgreSQL (`scripts/test` sets `SYNCHEALTH_REQUIRE_POSTGRES=1`).
    public static var required: Bool { ProcessInfo.processInfo.environment["SYNCHEALTH_REQUIRE_POSTGRES"] == "1" }

    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// One connection to the database a URL names.
    static func connect(_ parts: URLComponents, host: String) async throws -> PostgresConnection {
        let configuration = PostgresConnection.Configuration(
            host: host,
            port: parts.port ?? 5432,
            username: parts.user ?? "postgres",
            password: parts.password,
            database: String(parts.path.dropFirst()),
            tls: .disable
        )
        return try await PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.any(),
            configuration: configuration,
            id: 1,
            logger: Logger(label: "test")
        )
    }

    /// Creates an empty database on the cluster and returns its URL.
    public static func freshDatabase() async throws -> String {
        guard let base = baseURL, let parts = URLComponents(string: base), let host = parts.host else {
            throw Unavailable(description: "SYNCHEALTH_TEST_POSTGRES_URL is not set: run the suite with scripts/test")
        }
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let connection = try await connect(parts, host: host)
        // The name is generated above from hex digits only; CREATE DATABASE takes no bound parameters.
        try await connection.query("CREATE DATABASE \(unescaped: name)", logger: Logger(label: "test"))
        try await connection.close()
        var url = parts
        url.path = "/" + name
        return url.string ?? base
    }

    /// Runs fixed SQL statements, one at a time, on the database at `url` (a test's own set-up, such as a trigger
    /// that makes the service's next transactions fail).
    public static func execute(_ statements: [String], on url: String) async throws {
        guard let parts = URLComponents(string: url), let host = parts.host else {
            throw Unavailable(description: "not a database URL: \(url)")
        }
        let connection = try await connect(parts, host: host)
        do {
            for statement in statements { try await connection.query(PostgresQuery(unsafeSQL: statement), logger: Logger(label: "test")) }
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
    }

    /// One connection to the database at `url`, for a test's own queries; the caller closes it.
    public static func connection(to url: String) async throws -> PostgresConnection {
        guard let parts = URLComponents(string: url), let host = parts.host else {
            throw Unavailable(description: "not a database URL: \(url)")
        }
        return try await connect(parts, host: host)
    }

    /// The first column of each row of a fixed query, as text.
    public static func strings(_ sql: String, on connection: PostgresConnection) async throws -> [String] {
        var out: [String] = []
        for try await value in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: Logger(label: "test")).decode(String.self) {
            out.append(value)
        }
        return out
    }
}
