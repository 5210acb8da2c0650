import Logging
import SyncHealthServer
import Synchronization
import Testing

/// The server's log handler: the stream handler's output, with the logger's metadata formatted only when written.
@Suite("Deferred metadata log handler")
struct DeferredMetadataLogHandlerTests {
    /// Collects what the stream handler writes.
    final class Lines: TextOutputStream, Sendable {
        let text = Mutex("")
        func write(_ string: String) { text.withLock { $0 += string } }
    }

    func logger(_ lines: Lines, level: Logger.Level = .info) -> Logger {
        var stream = StreamLogHandler(label: "test", stream: lines, metadataProvider: nil)
        stream.logLevel = level
        return Logger(label: "test") { _ in DeferredMetadataLogHandler(stream) }
    }

    @Test("a written message carries the logger's metadata and its own; its own wins on a shared key")
    func mergesMetadata() {
        let lines = Lines()
        var logger = logger(lines)
        logger[metadataKey: "hb.request.id"] = "abc"
        logger[metadataKey: "device.id"] = "from-logger"
        logger.info("Events ingested", metadata: ["device.id": "from-message", "events.accepted": "1"])
        let text = lines.text.withLock { $0 }
        #expect(text.contains("hb.request.id=abc"))
        #expect(text.contains("device.id=from-message"))
        #expect(!text.contains("from-logger"))
        #expect(text.contains("events.accepted=1"))
        #expect(text.contains("Events ingested"))
        #expect(logger[metadataKey: "device.id"] == "from-logger")
    }

    @Test("the level filters as the stream handler's does, and a message without metadata is written plainly")
    func filtersByLevel() {
        let lines = Lines()
        let logger = logger(lines, level: .warning)
        logger.info("Dropped")
        logger.warning("Kept")
        let text = lines.text.withLock { $0 }
        #expect(!text.contains("Dropped"))
        #expect(text.contains("test: [SyncHealthServerTests] Kept"))
        #expect(logger.logLevel == .warning)
    }

    /// Counts how often its value is formatted.
    final class Counted: CustomStringConvertible, Sendable {
        let count = Atomic(0)
        var description: String {
            count.add(1, ordering: .relaxed)
            return "counted"
        }
    }

    @Test("setting metadata formats nothing; only a written message does")
    func formatsOnlyWhenWritten() {
        let lines = Lines()
        var logger = logger(lines, level: .warning)
        let value = Counted()
        for _ in 0..<10 { logger[metadataKey: "hb.request.id"] = .stringConvertible(value) }
        logger.info("Dropped")
        #expect(value.count.load(ordering: .relaxed) == 0)
        logger.warning("Kept")
        #expect(value.count.load(ordering: .relaxed) == 1)
        #expect(lines.text.withLock { $0 }.contains("hb.request.id=counted"))
    }
}
