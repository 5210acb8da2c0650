import Foundation
import Hummingbird
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The floors that `scripts/bench` measures the service's middleware and pipeline against: Hummingbird with the
// service's HTTP/1 settings and one route that reads a body and answers 202, nothing else. Built with the same
// flags as `synchealth`. Usage: bare-route PORT [--durable DIRECTORY]
//
// With `--durable`, the 202 waits until the body is on disk: the least a durable answer can cost here, with no
// engine, no dedupe and no fold. One thread takes every body waiting as a group, writes them in one call and syncs
// once (group commit, as the service's journal does), into a file written in full beforehand, so that a sync
// writes data and not the file's size (as the journal's recycled segments do).
let arguments = Array(CommandLine.arguments.dropFirst())
let port = arguments.first.flatMap(Int.init) ?? 8081
let durableDirectory = arguments.firstIndex(of: "--durable").flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil }

/// Bodies appended to a ring file by one thread, a group at a time, each group synced before its waiters resume.
final class GroupLog: @unchecked Sendable {
    struct WriteFailed: Error {}

    static let size = 64 << 20
    private let condition = NSCondition()
    private var waiting: [(bytes: ByteBuffer, done: CheckedContinuation<Void, any Error>)] = []
    private let descriptor: Int32
    private var offset = 0

    init(directory: String) throws {
        descriptor = open(directory + "/bare-route-log", O_RDWR | O_CREAT | O_TRUNC, 0o644)
        guard descriptor >= 0 else { throw WriteFailed() }
        let zeros = [UInt8](repeating: 0, count: 1 << 20)
        for _ in 0..<(Self.size >> 20) {
            guard zeros.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) == zeros.count else { throw WriteFailed() }
        }
        guard fsync(descriptor) == 0 else { throw WriteFailed() }
    }

    /// Returns once `bytes` are on disk.
    func append(_ bytes: ByteBuffer) async throws {
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
            condition.lock()
            waiting.append((bytes, done))
            condition.signal()
            condition.unlock()
        }
    }

    /// The group-commit loop; runs on its own thread for the life of the process.
    func run() {
        var record = [UInt8]()
        while true {
            condition.lock()
            while waiting.isEmpty { condition.wait() }
            let group = waiting
            waiting.removeAll(keepingCapacity: true)
            condition.unlock()
            record.removeAll(keepingCapacity: true)
            for entry in group { record += entry.bytes.readableBytesView }
            if offset + record.count > Self.size { offset = 0 }
            let written = record.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, off_t(offset)) }
            let synced = written == record.count && fdatasync(descriptor) == 0
            offset += record.count
            for entry in group {
                if synced { entry.done.resume() } else { entry.done.resume(throwing: WriteFailed()) }
            }
        }
    }
}

let log = try durableDirectory.map { try GroupLog(directory: $0) }
if let log {
    let thread = Thread { log.run() }
    thread.start()
}

let router = Router()
router.post("/v1/events") { request, _ -> Response in
    let body = try await request.body.collect(upTo: 1 << 20)
    if let log { try await log.append(body) }
    return Response(
        status: .accepted,
        headers: [.contentType: "application/json"],
        body: .init(byteBuffer: ByteBuffer(string: #"{"accepted":\#(body.readableBytes > 0 ? 1 : 0),"duplicates":0}"#))
    )
}
router.get("/livez") { _, _ in "ok" }
var logger = Logger(label: "bare-route")
logger.logLevel = .warning
let application = Application(
    router: router,
    server: .http1(configuration: .init(idleTimeout: .seconds(60))),
    configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: "bare-route"),
    logger: logger
)
try await application.runService()
