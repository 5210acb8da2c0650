import ArgumentParser

/// `synchealth`: the SyncHealth service and its tools.
@main
struct SyncHealthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "synchealth",
        abstract: "Sync health for apps that sync through iCloud: the server side of CloudKitSyncMonitor.",
        subcommands: [Serve.self, Simulate.self, Backup.self, Restore.self, Compact.self],
        defaultSubcommand: Serve.self
    )
}
