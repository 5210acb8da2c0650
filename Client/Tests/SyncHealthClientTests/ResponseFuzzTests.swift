import Foundation
import Testing

@testable import SyncHealthClient

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A local HTTP server that answers each request as a seeded random generator says: any status, any
/// `Retry-After`, bodies valid, broken or large, responses cut short, stalled, or no response at all.
final class FuzzingServer: @unchecked Sendable {
    struct Seen {
        var counts: [Int]
        var status: Int?
        /// Whether the answer was a whole, valid receipt (the client may take the batch as stored).
        var receipt: Bool
    }

    let port: Int
    private let listener: Int32
    private let lock = NSLock()
    private var rng: SplitMix
    private var _seen: [Seen] = []
    private var _calm = false
    var seen: [Seen] { lock.withLock { _seen } }
    /// Once calm, every request gets a valid 202.
    func calm() { lock.withLock { _calm = true } }

    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    init(seed: UInt64) throws {
        rng = SplitMix(state: seed)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else { throw URLError(.cannotConnectToHost) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop() {
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            let thread = Thread { [self] in serve(connection) }
            thread.start()
        }
    }

    private func send(_ fd: Int32, _ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    private func readRequest(_ fd: Int32) -> Data? {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            if let end = data.range(of: Data("\r\n\r\n".utf8)) {
                let head = String(decoding: data[..<end.lowerBound], as: UTF8.self)
                let length =
                    head.split(separator: "\r\n").compactMap { line -> Int? in
                        let parts = line.split(separator: ":", maxSplits: 1)
                        guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                        return Int(parts[1].trimmingCharacters(in: .whitespaces))
                    }.first ?? 0
                let bodyStart = end.upperBound
                while data.count - bodyStart < length {
                    let n = read(fd, &buffer, buffer.count)
                    guard n > 0 else { return nil }
                    data.append(contentsOf: buffer[0..<n])
                }
                let body = data[bodyStart..<(bodyStart + length)]
                return head.lowercased().contains("content-encoding: gzip") ? (try? gunzip(Data(body))) : Data(body)
            }
            let n = read(fd, &buffer, buffer.count)
            guard n > 0 else { return nil }
            data.append(contentsOf: buffer[0..<n])
        }
    }

    private func serve(_ fd: Int32) {
        defer { close(fd) }
        while let body = readRequest(fd) {
            let json = (try? JSONSerialization.jsonObject(with: body) as? [String: Any]) ?? [:]
            let counts = (json["events"] as? [[String: Any]] ?? []).compactMap { $0["pendingChanges"] as? Int }
            let receipt = #"{"accepted":\#(counts.count),"duplicates":0,"rejected":[]}"#
            let calm = lock.withLock { _calm }
            if calm {
                answer(fd, status: 202, headers: [], body: Array(receipt.utf8))
                lock.withLock { _seen.append(Seen(counts: counts, status: 202, receipt: true)) }
                continue
            }
            var rng = lock.withLock { () -> SplitMix in
                let copy = self.rng
                _ = self.rng.next()
                return copy
            }
            let statuses = [200, 202, 202, 204, 301, 400, 401, 403, 404, 408, 413, 429, 429, 500, 502, 503, 503, 504, 599, 999]
            let status = statuses[Int(rng.next() % UInt64(statuses.count))]
            let retryAfters = [
                nil, "1e300", "99999999999999999999", "-5", "NaN", "inf", "0", "0.05", "3600", "abc", "", "1e-300",
                "Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 0001 00:00:00 GMT", "Sun, 06 Nov 1994 08:49:37 GMT",
                String(repeating: "9", count: 60),
            ]
            var headers: [String] = []
            if let value = retryAfters[Int(rng.next() % UInt64(retryAfters.count))] { headers.append("Retry-After: \(value)") }
            let bodies: [[UInt8]] = [
                Array(receipt.utf8), [], Array("<html>captive portal</html>".utf8), Array(#"{"accepted":"#.utf8),
                Array(#"{"accepted":-1,"duplicates":1e400,"rejected":[{"index":99999,"detail":null}]}"#.utf8),
                (0..<4096).map { _ in UInt8(truncatingIfNeeded: rng.next()) }, Array(String(repeating: "x", count: 200_000).utf8),
                Array(#"{"type":"about:blank","title":"T","status":429,"detail":"slow down"}"#.utf8),
            ]
            let bodyChoice = Int(rng.next() % UInt64(bodies.count))
            let shape = rng.next() % 10
            switch shape {
            case 0:
                // No answer at all.
                lock.withLock { _seen.append(Seen(counts: counts, status: nil, receipt: false)) }
                return
            case 1:
                // Headers promise more than is sent.
                let bytes = bodies[bodyChoice]
                send(
                    fd,
                    Array("HTTP/1.1 \(status) X\r\nContent-Length: \(bytes.count + 100)\r\n\(headers.map { $0 + "\r\n" }.joined())\r\n".utf8) + bytes
                )
                lock.withLock { _seen.append(Seen(counts: counts, status: nil, receipt: false)) }
                return
            case 2:
                // Slow: the headers, then the body a moment later.
                usleep(100_000)
                answer(fd, status: status, headers: headers, body: bodies[bodyChoice])
            case 3:
                // Garbage instead of HTTP.
                send(fd, Array("NOT HTTP AT ALL\r\n\r\n".utf8))
                lock.withLock { _seen.append(Seen(counts: counts, status: nil, receipt: false)) }
                return
            default:
                answer(fd, status: status, headers: headers, body: bodies[bodyChoice])
            }
            let valid = (status == 200 || status == 202) && bodyChoice == 0
            lock.withLock { _seen.append(Seen(counts: counts, status: status, receipt: valid)) }
        }
    }

    private func answer(_ fd: Int32, status: Int, headers: [String], body: [UInt8]) {
        let head =
            "HTTP/1.1 \(status) X\r\nContent-Length: \(body.count)\r\nContent-Type: application/json\r\n\(headers.map { $0 + "\r\n" }.joined())\r\n"
        send(fd, Array(head.utf8) + body)
    }
}

@Suite("The transport against every kind of answer", .serialized)
struct ResponseFuzzTests {
    @Test(
        "random statuses, Retry-After values, bodies, truncated, stalled and absent answers: no trap, every wait bounded, nothing lost",
        arguments: [1, 2, 3] as [UInt64]
    )
    func fuzz(seed: UInt64) async throws {
        let server = try FuzzingServer(seed: seed)
        defer { server.stop() }
        var configuration = SyncHealthReporter.Configuration(
            endpoint: URL(string: "http://127.0.0.1:\(server.port)")!,
            ingestKey: "fuzz-key-0123456789",
            appId: "com.example.fuzz",
            deviceId: "fuzz-device",
            storageDirectory: temporaryDirectory()
        )
        configuration.heartbeatOnStart = false
        configuration.observesNetworkAndAccount = false
        configuration.transport = URLSessionTransport(requestTimeout: 1)
        configuration.sendInterval = .seconds(3600)
        configuration.minimumRetryDelay = .milliseconds(5)
        configuration.maximumRetryDelay = .milliseconds(200)
        configuration.batchSize = 5
        configuration.log = { _ in }
        let reporter = try SyncHealthReporter(configuration: configuration)
        var recorded = 0
        for _ in 0..<40 {
            for _ in 0..<3 {
                reporter.record(.pending(count: recorded))
                recorded += 1
            }
            do {
                try await reporter.flush()
            } catch SyncHealthReporterError.rateLimited(let wait) {
                #expect(wait <= .milliseconds(200), "a wait beyond maximumRetryDelay: \(wait)")
                try await Task.sleep(for: wait)
            } catch SyncHealthReporterError.refused {
                await reporter.updateIngestKey("fuzz-key-0123456789")
            } catch {}
        }
        // The server comes to its senses: what is still queued goes out.
        server.calm()
        await reporter.updateIngestKey("fuzz-key-0123456789")
        for _ in 0..<50 where reporter.delivery.queuedEvents > 0 {
            try await Task.sleep(for: .milliseconds(210))
            _ = try? await reporter.flush()
        }
        #expect(reporter.delivery.queuedEvents == 0)
        // Every event reached a valid receipt, or was dropped because the server refused its batch for good
        // (400 for the batch, 413 for an event alone).
        var settled = Set<Int>()
        for seen in server.seen {
            if seen.receipt || seen.status == 400 || (seen.status == 413 && seen.counts.count == 1) { settled.formUnion(seen.counts) }
        }
        let missing = Set(0..<recorded).subtracting(settled)
        #expect(missing.isEmpty, "events lost: \(missing.sorted().prefix(10))")
        await reporter.shutdown()
    }
}
