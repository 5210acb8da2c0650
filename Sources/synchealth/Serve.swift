import ArgumentParser
import Foundation
import Hummingbird
import Logging
import Metrics
import Prometheus
import SyncHealthCore
import SyncHealthServer
import SyncHealthStore

/// `synchealth serve`: runs the service until SIGTERM or SIGINT.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the SyncHealth service.",
        discussion: """
            Every setting can also be set in the environment, as the variable named next to its flag; a flag wins over \
            the environment. With no configuration at all, the service listens on 127.0.0.1:8080, keeps its \
            SQLite store in ./data, and generates an ingest key and an admin key there on first start.

            Durations are written 90s, 15m, 2h, or as a plain number of seconds (fractions allowed, e.g. 0.5).

            SETTINGS (flag, variable, default):

            """ + ServiceSetting.helpText
    )

    @Argument(parsing: .allUnrecognized, help: "Settings as --flag value or --flag=value, listed above.")
    var settings: [String] = []

    func run() async throws {
        let configuration: ServiceConfiguration
        do {
            configuration = try ServiceSetting.resolve(arguments: settings, environment: ProcessInfo.processInfo.environment)
        } catch {
            throw ValidationError(error.description)
        }
        let level = configuration.logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return DeferredMetadataLogHandler(handler)
        }
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        // Round trips are small whole numbers: buckets that tell 2 (a group without conflict) from 3 and more.
        factory.valueHistogramBuckets["synchealth_postgres_round_trips_per_group"] = [1, 2, 3, 4, 6, 8, 16]
        MetricsSystem.bootstrap(factory)
        let logger = Logger(label: "synchealth")
        do {
            let built = try SyncHealthApplication.build(configuration: configuration, logger: logger, registry: registry)
            try await built.application.runService()
        } catch let error as StoreError {
            logger.critical("Cannot start", metadata: ["error": "\(error.description)"])
            throw ExitCode(1)
        } catch let error as KeyRing.ConfigurationError {
            logger.critical("Cannot start", metadata: ["error": "\(error.description)"])
            throw ExitCode(1)
        } catch let error as TLSCertificateError {
            logger.critical("Cannot start", metadata: ["error": "\(error.description)"])
            throw ExitCode(1)
        }
    }
}
