public import Logging

/// A `StreamLogHandler` that formats the logger's metadata only when a message is written.
///
/// `StreamLogHandler` formats its metadata into a string each time the metadata changes. Hummingbird gives every
/// request a logger with its own `hb.request.id`, so at the usual `warning` level each request paid for a string
/// that was never written. Here, setting metadata only stores it; a
/// written message hands it to the stream handler with the message's own metadata, which wins on a shared key,
/// as in `StreamLogHandler`.
public struct DeferredMetadataLogHandler: LogHandler {
    private var stream: StreamLogHandler
    /// The logger's metadata, formatted only when a message is written.
    public var metadata: Logger.Metadata = [:]

    /// Wraps `stream`, which should carry no metadata of its own.
    public init(_ stream: StreamLogHandler) {
        self.stream = stream
    }

    /// The level below which messages are dropped.
    public var logLevel: Logger.Level {
        get { stream.logLevel }
        set { stream.logLevel = newValue }
    }

    /// The metadata provider.
    public var metadataProvider: Logger.MetadataProvider? {
        get { stream.metadataProvider }
        set { stream.metadataProvider = newValue }
    }

    /// One metadata item.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Writes the message with the logger's metadata and its own.
    public func log(event: LogEvent) {
        var event = event
        if !metadata.isEmpty {
            event.metadata = metadata.merging(event.metadata ?? [:]) { _, explicit in explicit }
        }
        stream.log(event: event)
    }
}
