// swift-tools-version:6.0
import PackageDescription

// The device side of SyncHealth. No third-party dependencies: Foundation and the system zlib only, so that an
// app adding this package pulls in nothing of the server.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "SyncHealthClient",
    platforms: [.iOS(.v17), .macOS(.v14), .tvOS(.v17), .watchOS(.v10), .visionOS(.v1)],
    products: [
        /// What an app embeds: the reporter, its event sources and its on-disk queue.
        .library(name: "SyncHealthClient", targets: ["SyncHealthClient"]),
        /// The device monitor (CloudKitSyncMonitor's state and summary), which the server runs too.
        .library(name: "SyncHealthMonitor", targets: ["SyncHealthMonitor"]),
    ],
    targets: [
        // Pure: the per-device monitor state, its summary, error classes, timestamps. No Foundation, no I/O, no clock.
        .target(name: "SyncHealthMonitor", swiftSettings: swiftSettings),
        // Fixtures for the monitor's tests; no product, so apps never see it (the server's tests compile the same
        // sources as a target of their own).
        .target(name: "SyncHealthMonitorTestKit", dependencies: ["SyncHealthMonitor"], swiftSettings: swiftSettings),
        // The system zlib, for gzipping batches.
        .systemLibrary(name: "CSyncHealthZlib", providers: [.apt(["zlib1g-dev"])]),
        // The privacy manifest is bundled, as Apple requires of an SDK; ClientTests/PrivacyManifestTests holds it
        // to the sources.
        .target(
            name: "SyncHealthClient",
            dependencies: ["SyncHealthMonitor", "CSyncHealthZlib"],
            resources: [.copy("PrivacyInfo.xcprivacy")],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "SyncHealthMonitorTests", dependencies: ["SyncHealthMonitor", "SyncHealthMonitorTestKit"], swiftSettings: swiftSettings),
        .testTarget(
            name: "SyncHealthClientTests",
            dependencies: ["SyncHealthClient", "SyncHealthMonitor", "CSyncHealthZlib"],
            swiftSettings: swiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The benchmarks are a package of their own (Benchmarks/Package.swift: ordo-one/benchmark needs tools 6.1), so that
// an app adding this package never sees the dependency, and Xcode 16.0 to 16.2 can add it.

// The kill test's child (Client/scripts/kill-test), only when asked for: SYNCHEALTH_KILL_TEST=1 swift build --package-path Client
if Context.environment["SYNCHEALTH_KILL_TEST"] != nil {
    package.targets.append(.executableTarget(name: "ClientKillTest", dependencies: ["SyncHealthClient"], path: "KillTest"))
}

// DocC (swift-docc-plugin) only when asked for, for the same reason:
// SYNCHEALTH_DOCS=1 swift package --package-path Client generate-documentation --target SyncHealthClient
if Context.environment["SYNCHEALTH_DOCS"] != nil {
    package.dependencies.append(.package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"))
}
