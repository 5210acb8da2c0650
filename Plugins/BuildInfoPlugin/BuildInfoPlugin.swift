import Foundation
import PackagePlugin

/// Writes the version and the commit a build is made from into `SyncHealthBuildInfo`, before every build: a
/// prebuild command, because the commit changes without any source file changing. The rule lives in
/// `build-info.sh` beside this file, so that scripts and the plugin read one rule.
@main
struct BuildInfoPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) async throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "generated")
        let package = context.package.directoryURL
        return [
            .prebuildCommand(
                displayName: "Build info for \(target.name)",
                executable: URL(filePath: "/bin/sh"),
                arguments: [
                    package.appending(path: "Plugins/BuildInfoPlugin/build-info.sh").path,
                    package.path,
                    output.appending(path: "BuildInfo+Generated.swift").path,
                ],
                // git needs PATH and HOME; SYNCHEALTH_BUILD_VERSION and SYNCHEALTH_BUILD_COMMIT stand in for a
                // build without the repository (a container image's).
                environment: ProcessInfo.processInfo.environment,
                outputFilesDirectory: output
            )
        ]
    }
}
