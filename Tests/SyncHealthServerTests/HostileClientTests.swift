import Foundation
import SyncHealthTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A raw TCP connection to a live server, for clients that misbehave.
final class RawConnection {
    let fd: Int32

    init?(port: Int) {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            return nil
        }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Sends every byte of `text` (NUL bytes included).
    func send(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    /// Reads what arrives within the receive timeout: "" when the server closed the connection, `nil` when
    /// nothing arrived in time.
    func receive() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = read(fd, &buffer, buffer.count)
        if n < 0 { return nil }
        return String(decoding: buffer[0..<n], as: UTF8.self)
    }

    /// Reads until what arrived contains `marker` (or the server closes, or nothing more arrives in time).
    func receive(until marker: String) -> String {
        var text = ""
        while !text.contains(marker), let more = receive(), !more.isEmpty { text += more }
        return text
    }

    deinit { close(fd) }
}

@Suite("Hostile clients against the live binary", .serialized)
struct HostileClientTests {
    @Test("half a request holds up nobody, and gets 408 problem+json at the request timeout")
    func slowClient() async throws {
        let server = try LiveServer(environment: ["SYNCHEALTH_REQUEST_TIMEOUT": "2", "SYNCHEALTH_INGEST_KEYS": "k-0123456789abcdefghijklmnop"])
        defer { server.stop() }
        let slow = try #require(RawConnection(port: server.port))
        // Headers trickle in and never end: no request ever reaches the router.
        slow.send("POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k-0123456789abcdefghijklmnop\r\nX-Slow: a")
        // Others are served while the stalled request is open (a blocked server would time them out).
        for _ in 0..<20 { #expect(try await server.request("GET", "/livez").status == 200) }
        // Then the server answers 408 and closes. Polled, not timed.
        var answer: String?
        for _ in 0..<6 where answer == nil { answer = slow.receive() }
        #expect(answer?.hasPrefix("HTTP/1.1 408") == true, "\(answer ?? "nothing")")
        #expect(answer?.contains("application/problem+json") == true)
        #expect(answer?.contains("urn:synchealth:problem:request-timeout") == true)
        #expect(try await server.request("GET", "/readyz").status == 200)
    }

    @Test("a kept-alive connection left idle past the request timeout is closed without a 408; a trickling body on it still gets one")
    func idleKeepAlive() async throws {
        let server = try LiveServer(environment: ["SYNCHEALTH_REQUEST_TIMEOUT": "1", "SYNCHEALTH_INGEST_KEYS": "k-0123456789abcdefghijklmnop"])
        defer { server.stop() }
        let idle = try #require(RawConnection(port: server.port))
        idle.send("GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(idle.receive(until: "\"pass\"}").hasPrefix("HTTP/1.1 200"))
        // Nothing more is sent: the server closes (end of stream) and writes no 408 that a client would take
        // for the answer to its next request.
        var after: String?
        for _ in 0..<3 where after == nil { after = idle.receive() }
        #expect(after == "", "\(after ?? "nothing")")

        let slow = try #require(RawConnection(port: server.port))
        slow.send("GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(slow.receive(until: "\"pass\"}").hasPrefix("HTTP/1.1 200"))
        slow.send(
            "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k-0123456789abcdefghijklmnop\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        )
        var answer: String?
        for _ in 0..<3 where answer == nil { answer = slow.receive() }
        #expect(answer?.hasPrefix("HTTP/1.1 408") == true, "\(answer ?? "nothing")")
    }

    @Test("a connection used again before its idle deadline gets a new one: it is still open past the first, and closed after the second")
    func idleDeadlineMoves() async throws {
        let server = try LiveServer(environment: ["SYNCHEALTH_REQUEST_TIMEOUT": "4"])
        defer { server.stop() }
        let connection = try #require(RawConnection(port: server.port))
        let request = "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"
        connection.send(request)
        #expect(connection.receive(until: "\"pass\"}").hasPrefix("HTTP/1.1 200"))
        let first = Date()
        try await Task.sleep(for: .seconds(2))
        connection.send(request)
        #expect(connection.receive(until: "\"pass\"}").hasPrefix("HTTP/1.1 200"))
        let second = Date()
        // Half a second past the first deadline, well before the second one.
        let wait = 4.5 - Date().timeIntervalSince(first)
        if wait > 0 { try await Task.sleep(for: .seconds(wait)) }
        #expect(Date().timeIntervalSince(second) < 3.5, "the test itself ran late")
        connection.send(request)
        #expect(connection.receive(until: "\"pass\"}").hasPrefix("HTTP/1.1 200"), "closed at the first deadline")
        // Then left idle, it is closed without an answer.
        var after: String?
        for _ in 0..<3 where after == nil { after = connection.receive() }
        #expect(after == "", "\(after ?? "nothing")")
    }

    @Test("oversized headers get 431 and malformed requests 400, as problem+json, without harm")
    func garbage() async throws {
        let server = try LiveServer()
        defer { server.stop() }
        let big = try #require(RawConnection(port: server.port))
        big.send("GET /livez HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "a", count: 200_000) + "\r\n\r\n")
        let answer = big.receive() ?? ""
        #expect(answer.hasPrefix("HTTP/1.1 431"), "\(answer.prefix(60))")
        #expect(answer.contains("application/problem+json") && answer.contains("\"status\":431"))
        let junk = try #require(RawConnection(port: server.port))
        junk.send("\u{0}\u{1}\u{2}NOT HTTP AT ALL\r\n\r\n")
        let junkAnswer = junk.receive() ?? ""
        #expect(junkAnswer.hasPrefix("HTTP/1.1 400"), "\(junkAnswer.prefix(60))")
        #expect(junkAnswer.contains("urn:synchealth:problem:malformed-request"))
        #expect(try await server.request("GET", "/livez").status == 200)
    }

    @Test("an HTTP/1.0 request with Transfer-Encoding gets 400 and the connection closes, its body unread; plain HTTP/1.0 works")
    func chunkedHTTP10() async throws {
        let server = try LiveServer()
        defer { server.stop() }
        let smuggler = try #require(RawConnection(port: server.port))
        // Chunked, the body would end after "0"; a proxy framing by the connection's end reads a second request.
        smuggler.send(
            "POST /v1/events HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
                + "0\r\n\r\nGET /livez HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        var answer = ""
        while let more = smuggler.receive(), !more.isEmpty { answer += more }
        #expect(answer.hasPrefix("HTTP/1.1 400") || answer.hasPrefix("HTTP/1.0 400"), "\(answer.prefix(60))")
        #expect(answer.contains("urn:synchealth:problem:malformed-request") && answer.contains("Transfer-Encoding"))
        let statusLines = answer.components(separatedBy: "\r\n").filter { $0.hasPrefix("HTTP/1.") }
        #expect(statusLines.count == 1, "one answer, then the connection closed: \(answer)")

        let plain = try #require(RawConnection(port: server.port))
        plain.send("GET /livez HTTP/1.0\r\nHost: x\r\n\r\n")
        var reply = ""
        while let more = plain.receive(), !more.isEmpty { reply += more }
        #expect(reply.hasPrefix("HTTP/1.1 200"), "\(reply.prefix(60))")
        #expect(try await server.request("GET", "/livez").status == 200)
    }

    @Test("connections over the limit wait instead of being served at once")
    func connectionLimit() async throws {
        let server = try LiveServer(environment: ["SYNCHEALTH_MAX_CONNECTIONS": "2"])
        defer { server.stop() }
        let holders = [RawConnection(port: server.port), RawConnection(port: server.port)]
        #expect(holders.allSatisfy { $0 != nil })
        try await Task.sleep(for: .milliseconds(200))
        let third = try #require(RawConnection(port: server.port))
        third.send("GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
        var timeout = timeval(tv_sec: 0, tv_usec: 500_000)
        setsockopt(third.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        #expect(third.receive() == nil, "not served while two connections are open")
        _ = holders  // keep them open until here
    }
}
