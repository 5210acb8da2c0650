import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import SyncHealthStore

/// `GET /v1/backup` (admin key): a consistent copy of the embedded store, as a SQLite file, taken while the service
/// keeps ingesting. Every event acknowledged before the request began is in it (`StoreBackup`). A client that goes
/// away while the copy is made stops the copy.
struct BackupRoutes {
    /// The store, when it backs itself up (SQLite); `nil` for PostgreSQL.
    let store: (any StoreBackup)?
    let audit: AuditLog
    let files = FileIO()
    /// One backup at a time, and a stalled download cut off.
    var limits = BackupGuard()

    @Sendable func backup(_ request: Request, context: AppRequestContext) async throws -> Response {
        try context.require(.admin)
        // A backup holds every app's devices and every subscription's secret.
        try context.requireGlobal()
        guard let store else { throw APIError.backupUnsupported }
        guard limits.begin() else { throw APIError.backupRunning }
        // Freed when the copy is sent or deleted: on every path below, through `BackupRelease` or this `defer`.
        var handedOver = false
        defer { if !handedOver { limits.end() } }
        let path = (store.backupDirectory as NSString).appendingPathComponent("\(BackupRoutes.filePrefix)\(UUID().uuidString).sqlite")
        let body: ResponseBody
        let size: Int
        do {
            // Cancelled when the client closes its connection: nobody would read the copy.
            try await request.body.consumeWithCancellationOnInboundClose { _ in try await store.backup(to: path) }
            size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
            body = try await files.loadFile(path: path, context: context)
        } catch {
            unlink(path)
            guard error is CancellationError else { throw error }
            context.logger.notice("Backup stopped: its client went away")
            // Nobody reads it; the request metrics count it as nginx does.
            return Response(status: .init(code: 499, reasonPhrase: "Client Closed Request"))
        }
        context.logger.notice("Backup taken", metadata: ["backup.bytes": "\(size)"])
        await audit.record(context, "backup", "\(size) bytes")
        var headers = HTTPFields()
        headers[.contentType] = "application/vnd.sqlite3"
        headers[.contentDisposition] = "attachment; filename=\"synchealth-backup.sqlite\""
        // It holds every subscription's secret: no cache keeps a copy.
        headers[.cacheControl] = "no-store"
        // The connection ends with the copy (watching for the client to go away consumes its inbound side): said, so
        // that a keep-alive client does not send its next request on it.
        headers[.connection] = "close"
        // The copy goes once it is sent, or the client went away or stopped reading.
        let limits = limits
        let watchdog = StallWatchdog(channel: context.channel, timeout: limits.stallTimeout)
        let release = BackupRelease {
            unlink(path)
            limits.end()
        }
        handedOver = true
        return Response(
            status: .ok,
            headers: headers,
            body: ResponseBody(contentLength: size) { writer in
                defer {
                    watchdog.disarm()
                    release()
                }
                try await body.write(WatchedBodyWriter(base: writer, watchdog: watchdog, remaining: size, release: release))
            }
        )
    }

    /// The name every copy starts with; the service deletes leftovers (a crash mid-backup) when it starts.
    static let filePrefix = "synchealth-backup-"

    /// Deletes copies a crash left in `directory`.
    static func removeLeftovers(in directory: String) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where name.hasPrefix(filePrefix) {
            unlink((directory as NSString).appendingPathComponent(name))
        }
    }
}
