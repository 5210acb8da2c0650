// swift-tools-version:6.1
import PackageDescription

// The client's benchmarks, a package of their own: ordo-one/benchmark needs tools 6.1 (its MallocInterposer trait),
// while the client itself says 6.0, so that apps on Xcode 16.0 to 16.2 can add it.
//   swift package --package-path Client/Benchmarks benchmark          allocations and timings of the hot paths
//   swift run -c release --package-path Client/Benchmarks ClientWire  bytes a batch, wake-ups, record's cost
let package = Package(
    name: "SyncHealthClientBenchmarks",
    platforms: [.iOS(.v17), .macOS(.v14), .tvOS(.v17), .watchOS(.v10), .visionOS(.v1)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "ClientBenchmarks",
            dependencies: [.product(name: "SyncHealthClient", package: "Client"), .product(name: "Benchmark", package: "benchmark")],
            path: "ClientBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(name: "ClientWire", dependencies: [.product(name: "SyncHealthClient", package: "Client")], path: "ClientWire"),
    ]
)
