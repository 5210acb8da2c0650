/// A store that can write a consistent copy of itself while it keeps taking commits (`GET /v1/backup`). The
/// embedded store can; a store in PostgreSQL is backed up with PostgreSQL's own tools (`pg_dump`).
public protocol StoreBackup: Sendable {
    /// A directory on the store's own disk, where a copy can be written before it is sent.
    var backupDirectory: String { get }
    /// Writes the copy to `path`, which must not exist. Every commit that returned before the call is in it.
    /// Cancelling the calling task stops the copy, leaves nothing at `path`, and throws `CancellationError`.
    func backup(to path: String) async throws
}
