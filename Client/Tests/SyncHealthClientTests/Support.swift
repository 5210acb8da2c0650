import CSyncHealthZlib
import Foundation

@testable import SyncHealthClient

/// A fresh directory under the system's temporary directory.
func temporaryDirectory() -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("synchealth-client-\(UUID().uuidString)", isDirectory: true)
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// A configuration for tests: a stand-in transport, a queue of its own, no platform observers, no heartbeat.
func testConfiguration(_ transport: FakeServer, directory: URL = temporaryDirectory()) -> SyncHealthReporter.Configuration {
    var c = SyncHealthReporter.Configuration(
        endpoint: URL(string: "http://127.0.0.1:9")!,
        ingestKey: "ingest",
        appId: "com.example.notes",
        containerId: "iCloud.com.example.notes",
        deviceId: "device-1",
        storageDirectory: directory
    )
    c.transport = transport
    c.heartbeatOnStart = false
    c.observesNetworkAndAccount = false
    c.sendInterval = .seconds(3600)
    c.minimumRetryDelay = .milliseconds(10)
    c.maximumRetryDelay = .milliseconds(50)
    c.log = { _ in }
    // Xcode's test runner marks this process as a test host: these tests are the reporter's own.
    c.reportsFromPreviewsAndTests = true
    return c
}

/// A stand-in server: records every request and answers with a scripted status (202 with a receipt by default).
final class FakeServer: ReportTransport, @unchecked Sendable {
    struct Request {
        var body: Data
        var headers: [String: String]
        /// The decoded JSON body (gunzipped when needed).
        var json: [String: Any]
        var eventIds: [String] { (json["events"] as? [[String: Any]] ?? []).compactMap { $0["eventId"] as? String } }
    }

    private let lock = NSLock()
    private var _requests: [Request] = []
    private var script: [(Request) -> TransportResponse?] = []
    /// Answers for requests after the script is used up; `nil` is a 202 accepting everything.
    var fallback: ((Request) -> TransportResponse)?

    var requests: [Request] { lock.withLock { _requests } }
    var deliveredIds: [String] { requests.flatMap(\.eventIds) }

    /// Answers the next requests in order; a `nil` answer is the default 202.
    func then(_ answer: @escaping (Request) -> TransportResponse?) { lock.withLock { script.append(answer) } }
    func then(status: Int, headers: [String: String] = [:], body: String = "") {
        then { _ in TransportResponse(status: status, headers: headers, body: Data(body.utf8)) }
    }

    func post(_ body: Data, to url: URL, headers: [String: String]) async throws -> TransportResponse {
        let plain = headers["Content-Encoding"] == "gzip" ? try gunzip(body) : body
        let json = (try JSONSerialization.jsonObject(with: plain) as? [String: Any]) ?? [:]
        let request = Request(body: body, headers: headers, json: json)
        let answer: TransportResponse? = lock.withLock {
            _requests.append(request)
            return script.isEmpty ? nil : script.removeFirst()(request)
        }
        if let answer { return answer }
        if let fallback { return fallback(request) }
        return Self.accepted(request)
    }

    static func accepted(_ request: Request) -> TransportResponse {
        TransportResponse(status: 202, body: Data(#"{"accepted":\#(request.eventIds.count),"duplicates":0,"rejected":[]}"#.utf8))
    }
}

struct GunzipFailed: Error {}

/// Inflates a gzip body.
func gunzip(_ data: Data) throws -> Data {
    var stream = z_stream()
    guard inflateInit2_(&stream, 15 + 16, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { throw GunzipFailed() }
    defer { inflateEnd(&stream) }
    var output = Data(count: data.count * 20 + 1024)
    let status: Int32 = data.withUnsafeBytes { source in
        output.withUnsafeMutableBytes { target in
            stream.next_in = UnsafeMutablePointer(mutating: source.bindMemory(to: Bytef.self).baseAddress)
            stream.avail_in = uInt(source.count)
            stream.next_out = target.bindMemory(to: Bytef.self).baseAddress
            stream.avail_out = uInt(target.count)
            return inflate(&stream, Z_FINISH)
        }
    }
    guard status == Z_STREAM_END else { throw GunzipFailed() }
    output.count = Int(stream.total_out)
    return output
}
