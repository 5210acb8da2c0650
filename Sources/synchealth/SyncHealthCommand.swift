import ArgumentParser
import Foundation
import SyncHealthBuildInfo

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `synchealth`: the SyncHealth service and its tools.
@main
struct SyncHealthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "synchealth",
        abstract: "Sync health for apps that sync through iCloud: the server side of CloudKitSyncMonitor.",
        version: BuildInfo.version,
        subcommands: [Serve.self, Simulate.self, Backup.self, Restore.self, Compact.self, AppAttestCommand.self, Version.self],
        defaultSubcommand: Serve.self
    )

    /// Every file the service and its tools create (the store, its journal, backups, restored stores, generated
    /// keys) is for the service's user alone, as PostgreSQL does: they hold webhook secrets and API keys.
    static func main() async {
        umask(0o077)
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            // `app-attest verify` documents 2 for bad arguments, since 1 means "refused".
            if CommandLine.arguments.dropFirst().first == AppAttestCommand.configuration.commandName, exitCode(for: error) == .validationFailure {
                FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
                exit(withError: ExitCode(AppAttestCommand.usageExitCode))
            }
            exit(withError: error)
        }
    }
}

/// `synchealth version`: the version and the commit of this build.
struct Version: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the version and the commit this binary was built from.")

    func run() {
        print("synchealth \(BuildInfo.version) (commit \(BuildInfo.commit))")
    }
}
