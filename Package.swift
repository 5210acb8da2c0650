// swift-tools-version:6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "synchealth",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "synchealth", targets: ["synchealth"]),
        .library(name: "SyncHealthCore", targets: ["SyncHealthCore"]),
        .library(name: "SyncHealthEngineTesting", targets: ["SyncHealthEngineTesting"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        // Already in the graph through Hummingbird; named because the server imports HTTPTypes itself.
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/adam-fowler/compress-nio", from: "1.5.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // Already in the graph through postgres-nio; named for the TLS the service serves itself.
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // App Attest: the credential certificate's chain to Apple's root, and its nonce extension.
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        // The device side: the monitor both build, and the client that `synchealth simulate` sends through.
        .package(path: "Client"),
    ],
    targets: [
        // Pure domain: alert rules, fleet counters, the notification policy, the batch decoder, over the device monitor
        // (`Client/Sources/SyncHealthMonitor`). No I/O, no clock.
        .target(
            name: "SyncHealthCore",
            dependencies: [
                // The per-device monitor, shared with the client package (one module, not a copy).
                .product(name: "SyncHealthMonitor", package: "Client"),
                // A heap for the notification policy's settle queue: a data structure, no I/O.
                .product(name: "HeapModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings
        ),
        // Storage's ports (`SyncStore` and the protocols around it), the records they carry, the in-memory store.
        .target(
            name: "SyncHealthStore",
            dependencies: ["SyncHealthCore"],
            swiftSettings: swiftSettings
        ),
        // The embedded store: SQLite (GRDB) behind a commit journal.
        .target(
            name: "SyncHealthSQLite",
            dependencies: [
                "SyncHealthStore",
                "SyncHealthCore",
                "CWriteback",
                .product(name: "GRDB", package: "GRDB.swift"),
                // The SQLite C API, for binding the hot per-event insert without GRDB's argument boxing.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                // zlib's CRC-32 and Adler-32 check each journal record; SHA-256 the records 0.1.0 wrote.
                "CZlib",
                .product(name: "Crypto", package: "swift-crypto"),
                // A thread of its own, of lower priority, for the maintenance service's folds.
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The PostgreSQL store (postgres-nio), for several replicas over one database.
        .target(
            name: "SyncHealthPostgres",
            dependencies: [
                "SyncHealthCore",
                "SyncHealthStore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // Typed C wrappers around libcurl's variadic API, its URL parser with hosts in ASCII (libidn2), and its socket hook.
        .target(
            name: "CCurl",
            linkerSettings: [.linkedLibrary("curl"), .linkedLibrary("idn2")]
        ),
        // One whole gzip member inflated by zlib, telling a truncated stream and trailing bytes apart from corruption;
        // and the journal records' check.
        .target(
            name: "CZlib",
            linkerSettings: [.linkedLibrary("z")]
        ),
        // glibc's malloc_trim, for giving freed heap pages back (the server's HeapTrimmer).
        .target(name: "CHeap"),
        // Linux's sync_file_range, for starting the writeback of the SQLite files while a fold writes them.
        .target(name: "CWriteback"),
        // The version and commit of a build, written in before every build by the plugin (see RELEASES).
        .plugin(name: "BuildInfoPlugin", capability: .buildTool()),
        .target(name: "SyncHealthBuildInfo", swiftSettings: swiftSettings, plugins: ["BuildInfoPlugin"]),
        // Outbound webhooks: signing, the transport protocol, the libcurl transport.
        .target(
            name: "SyncHealthWebhooks",
            dependencies: [
                "SyncHealthBuildInfo",
                "CCurl",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // App Attest's verification (Apple's steps for attestations and assertions) and its small CBOR reader. Pure:
        // the time and the roots come from the caller, and nothing is stored.
        .target(
            name: "SyncHealthAttest",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: swiftSettings
        ),
        // A stand-in for Apple's App Attest: a root and intermediate of its own, and devices that attest and assert
        // as the Secure Enclave does, for the tests and the load generator.
        .target(
            name: "SyncHealthAttestTesting",
            dependencies: [
                "SyncHealthAttest",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: swiftSettings
        ),
        // The monitor engine: the two pipelines (local and shared store), group planning, timers, the webhook
        // outbox's delivery. No HTTP.
        .target(
            name: "SyncHealthEngine",
            dependencies: [
                "SyncHealthCore",
                "SyncHealthStore",
                "SyncHealthWebhooks",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // HTTP around the engine (routes, auth, limits, errors) and the composition root.
        .target(
            name: "SyncHealthServer",
            dependencies: [
                "SyncHealthEngine",
                "SyncHealthCore",
                "SyncHealthStore",
                "SyncHealthSQLite",
                "SyncHealthPostgres",
                "SyncHealthWebhooks",
                "SyncHealthBuildInfo",
                "SyncHealthAttest",
                "CHeap",
                "CZlib",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOFoundationEssentialsCompat", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            // Served at /openapi.yaml; the top-level openapi.yaml is a symlink to it.
            resources: [
                .embedInCode("openapi.yaml"),
                .embedInCode("Dashboard/index.html"),
                .embedInCode("Dashboard/dashboard.js"),
                .embedInCode("Dashboard/dashboard.css"),
                .embedInCode("Dashboard/icon.svg"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "synchealth",
            dependencies: [
                "SyncHealthServer",
                "SyncHealthBuildInfo",
                // `synchealth app-attest verify`.
                "SyncHealthAttest",
                // `synchealth simulate` sends through the client package's delivery.
                .product(name: "SyncHealthClient", package: "Client"),
                "SyncHealthCore",
                "SyncHealthStore",
                "SyncHealthSQLite",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings
        ),
        // The bare Hummingbird route `scripts/bench` measures the service's request path against.
        .executableTarget(
            name: "bare-route",
            dependencies: [.product(name: "Hummingbird", package: "hummingbird"), .product(name: "Logging", package: "swift-log")],
            path: "Benchmarks/BareRoute",
            swiftSettings: swiftSettings
        ),
        // What tests of the engine need from outside it: a clock they move, a transport that records.
        .target(
            name: "SyncHealthEngineTesting",
            dependencies: ["SyncHealthCore", "SyncHealthStore", "SyncHealthEngine", "SyncHealthWebhooks"]
        ),
        // Helpers shared by the test targets.
        // The monitor's test fixtures, from the client package's sources: the client keeps them as a target of its own
        // tests, not as a product apps would see in Xcode's product picker.
        .target(
            name: "SyncHealthMonitorFixtures",
            dependencies: [.product(name: "SyncHealthMonitor", package: "Client")],
            path: "Client/Sources/SyncHealthMonitorTestKit"
        ),
        .target(
            name: "SyncHealthTestSupport",
            dependencies: [
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                "SyncHealthCore",
                "SyncHealthStore",
                "SyncHealthSQLite",
                "SyncHealthPostgres",
                "SyncHealthEngine",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/SyncHealthTestSupport"
        ),
        .testTarget(
            name: "SyncHealthCoreTests",
            dependencies: ["SyncHealthCore", "SyncHealthTestSupport", "SyncHealthMonitorFixtures"]
        ),
        .testTarget(
            name: "SyncHealthStoreTests",
            dependencies: [
                .product(name: "GRDB", package: "GRDB.swift"),
                "SyncHealthStore", "SyncHealthSQLite", "SyncHealthPostgres", "SyncHealthCore", "SyncHealthTestSupport",
                "SyncHealthMonitorFixtures",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "SyncHealthSQLiteTests",
            dependencies: [
                "SyncHealthPostgres",
                "SyncHealthSQLite", "SyncHealthStore", "SyncHealthCore", "SyncHealthTestSupport", "SyncHealthEngineTesting",
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "SyncHealthPostgresTests",
            dependencies: [
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                "SyncHealthPostgres", "SyncHealthStore", "SyncHealthCore", "SyncHealthTestSupport",
                .product(name: "Logging", package: "swift-log"), .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .testTarget(name: "SyncHealthWebhooksTests", dependencies: ["SyncHealthWebhooks"]),
        .testTarget(
            name: "SyncHealthAttestTests",
            dependencies: [
                "SyncHealthAttest", "SyncHealthAttestTesting",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            // Read by path: the real attestation of the shared reference data.
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "SyncHealthEngineTests",
            // CHeap: a test counts what the allocator holds.
            dependencies: [
                .product(name: "HeapModule", package: "swift-collections"), .product(name: "NIOFoundationEssentialsCompat", package: "swift-nio"),
                "SyncHealthEngine", "SyncHealthEngineTesting", "SyncHealthCore", "SyncHealthStore", "SyncHealthSQLite",
                "SyncHealthPostgres", "SyncHealthWebhooks", "SyncHealthTestSupport", "CHeap",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "SyncHealthServerTests",
            dependencies: [
                "CZlib", .product(name: "GRDB", package: "GRDB.swift"), .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"), .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOFoundationEssentialsCompat", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"), .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                "SyncHealthServer",
                "SyncHealthEngine",
                "SyncHealthEngineTesting",
                "SyncHealthCore",
                "SyncHealthStore",
                "SyncHealthSQLite",
                "SyncHealthPostgres",
                "SyncHealthWebhooks",
                "SyncHealthBuildInfo",
                "SyncHealthTestSupport",
                "SyncHealthAttest",
                "SyncHealthAttestTesting",
                .product(name: "SyncHealthClient", package: "Client"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]
        ),
    ]
)

// Benchmarks (ordo-one/benchmark) build only when asked for, as Hummingbird does, so that `swift build` and
// `swift test` stay lean:  SYNCHEALTH_BENCHMARKS=1 swift package --scratch-path .build-bench benchmark
if Context.environment["SYNCHEALTH_BENCHMARKS"] != nil {
    package.dependencies.append(.package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]))
    package.targets += [
        .executableTarget(
            name: "CoreBenchmarks",
            dependencies: ["SyncHealthCore", .product(name: "Benchmark", package: "benchmark")],
            path: "Benchmarks/CoreBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "StateSize",
            dependencies: ["SyncHealthCore"],
            path: "Benchmarks/StateSize"
        ),
        .executableTarget(
            name: "GrowthPauses",
            dependencies: ["SyncHealthCore", .product(name: "HeapModule", package: "swift-collections")],
            path: "Benchmarks/GrowthPauses"
        ),
        .executableTarget(
            name: "PruneCost",
            dependencies: [
                "SyncHealthCore", "SyncHealthStore", "SyncHealthSQLite",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Benchmarks/PruneCost"
        ),
        .executableTarget(
            name: "Churn",
            dependencies: [
                "CHeap", "SyncHealthCore", "SyncHealthStore", "SyncHealthSQLite", "SyncHealthEngine", "SyncHealthEngineTesting", "SyncHealthWebhooks",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Benchmarks/Churn"
        ),
    ]
}

// The same upcoming features on every Swift target that does not set its own: tests, their support target and the
// benchmarks.
let cTargets: Set = ["CCurl", "CHeap", "CWriteback", "CZlib"]
for index in package.targets.indices
where package.targets[index].swiftSettings == nil && !cTargets.contains(package.targets[index].name) && package.targets[index].type != .plugin {
    package.targets[index].swiftSettings = swiftSettings
}
