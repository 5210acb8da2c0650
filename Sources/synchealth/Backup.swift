import ArgumentParser
import Foundation
import SyncHealthSQLite
import SyncHealthStore

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `synchealth backup`: downloads a consistent backup of a running service's embedded store (`GET /v1/backup`),
/// checks it, and keeps it only if it checks out.
struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Download a consistent backup of a running service's embedded store (GET /v1/backup, admin key).",
        discussion: """
            The service folds its journal and copies its database while it keeps ingesting: every event it \
            acknowledged before the request began is in the backup. The file is checked (SQLite's integrity check, \
            a schema this build knows) before it is kept. Restore it with `synchealth restore`. A service on \
            PostgreSQL answers 501: back up the database with pg_dump.
            """
    )

    @Option(help: "The service's base URL, e.g. https://synchealth.example.com.")
    var url: String

    @Option(help: "An admin key.")
    var key: String

    @Option(help: "Where to write the backup; an existing file is not replaced.")
    var output: String

    func run() async throws {
        guard let base = URL(string: url), ["http", "https"].contains(base.scheme?.lowercased() ?? "") else {
            throw ValidationError("--url must be an http or https URL")
        }
        guard !FileManager.default.fileExists(atPath: output) else {
            throw ValidationError("\(output) exists; choose another file")
        }
        var request = URLRequest(url: base.appendingPathComponent("v1").appendingPathComponent("backup"))
        request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization")
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 600
        configuration.timeoutIntervalForResource = 24 * 3600
        let session = URLSession(configuration: configuration)
        let started = Date()
        let progress = Progress(started: started)
        let (downloaded, response) = try await session.download(for: request)
        progress.stop()
        defer { try? FileManager.default.removeItem(at: downloaded) }
        guard let http = response as? HTTPURLResponse else { throw Failure("no HTTP answer from \(base)") }
        guard http.statusCode == 200 else {
            let body = (try? String(contentsOf: downloaded, encoding: .utf8)) ?? ""
            throw Failure("the service answered \(http.statusCode): \(body.prefix(500))")
        }
        let contents: SQLiteStore.BackupContents
        do {
            contents = try SQLiteStore.checkBackup(at: downloaded.path)
        } catch {
            throw Failure("the downloaded backup does not check out: \(error.description)")
        }
        try FileManager.default.moveItem(at: downloaded, to: URL(fileURLWithPath: output))
        let bytes = (try? FileManager.default.attributesOfItem(atPath: output)[.size] as? NSNumber)?.intValue ?? 0
        print(
            "backup: \(output): \(bytes) bytes, \(contents.devices) devices, schema \"\(contents.schema)\", "
                + "in \(String(format: "%.1f", Date().timeIntervalSince(started))) s"
        )
    }

    /// On a terminal, a line that says how long the backup has taken so far (the copy is made before any byte is
    /// sent, so its size is not known until the end).
    final class Progress: @unchecked Sendable {
        private let timer: (any DispatchSourceTimer)?

        init(started: Date) {
            guard isatty(STDERR_FILENO) == 1 else {
                timer = nil
                return
            }
            let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "synchealth.backup.progress"))
            timer.schedule(deadline: .now() + 1, repeating: 1)
            timer.setEventHandler {
                FileHandle.standardError.write(Data("\rbackup: \(Int(Date().timeIntervalSince(started))) s".utf8))
            }
            timer.resume()
            self.timer = timer
        }

        func stop() {
            guard let timer else { return }
            timer.cancel()
            FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
        }
    }
}

/// `synchealth restore`: installs a backup into a stopped service's data directory.
struct Restore: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Install a backup (from synchealth backup) into a stopped service's data directory.",
        discussion: """
            The backup is checked first (SQLite's integrity check, a schema this build knows). The directory must \
            not be in use by a running service, nor hold a store or journal of its own: move those away first. \
            Nothing in the directory changes unless the whole backup is installed.
            """
    )

    @Argument(help: "The backup file.")
    var file: String

    @Option(name: .customLong("data-dir"), help: "The data directory to restore into.")
    var dataDirectory: String

    func run() throws {
        do {
            let contents = try SQLiteStore.restore(backup: file, into: dataDirectory)
            print("restore: \(contents.devices) devices, schema \"\(contents.schema)\", into \(dataDirectory); start the service on it")
        } catch {
            throw Failure("restore: \(error.description)")
        }
    }
}

/// A failure the command reports as its message, with exit code 1.
struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// `synchealth compact`: rewrites a stopped service's embedded store so that it returns free pages.
struct Compact: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rewrite a stopped service's embedded store so that it gives the disk back the pages it frees.",
        discussion: """
            Stores made by this release return free pages by themselves. A store made by an earlier release keeps \
            them: run this once, with the service stopped. It takes about as long as a backup and needs as much \
            free disk as the database file. Restoring a backup converts a store too.
            """
    )

    @Option(name: .customLong("data-dir"), help: "The data directory of the stopped service.")
    var dataDirectory: String

    func run() async throws {
        do {
            let (before, after) = try await SQLiteStore.compact(directory: dataDirectory)
            func mebibytes(_ pages: Int, _ size: Int) -> String { String(format: "%.1f MiB", Double(pages * size) / 1_048_576) }
            print(
                "compact: \(mebibytes(before.pages, before.pageSize)) (\(mebibytes(before.free, before.pageSize)) free) -> "
                    + "\(mebibytes(after.pages, after.pageSize)); free pages are returned from now on"
            )
        } catch {
            throw Failure("compact: \(error)")
        }
    }
}
