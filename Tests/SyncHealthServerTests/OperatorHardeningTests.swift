import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import NIOEmbedded
import SyncHealthTestSupport
import Testing

@testable import SyncHealthServer

#if canImport(Glibc)
import Glibc
#endif

/// What an operator can rely on: keys that cannot be guessed or confused, `/metrics` behind a key when asked,
/// data files for the service's user alone, and a backup that cannot hold the disk.
@Suite("Operator hardening", .serialized)
struct OperatorHardeningTests {
    @Test("a key shorter than 16 characters, or one key in two roles, is refused; the message names the role, not the key")
    func keyRules() throws {
        let long = "0123456789abcdef-ABCDEFGHIJ"
        #expect(throws: KeyRing.ConfigurationError(description: "a read key is shorter than 16 characters")) {
            try KeyRing.checked(ingest: [long + "i"], read: ["short"], admin: [])
        }
        #expect(throws: KeyRing.ConfigurationError(description: "an ingest key is shorter than 16 characters")) {
            try KeyRing.checked(ingest: ["short@com.example"], read: [], admin: [])
        }
        #expect(throws: KeyRing.ConfigurationError(description: "one key is given two roles, read and admin")) {
            try KeyRing.checked(ingest: [], read: [long], admin: [long])
        }
        #expect(throws: KeyRing.ConfigurationError(description: "one key is given two roles, ingest and metrics")) {
            try KeyRing.checked(ingest: [long + "@com.a"], read: [], admin: [], metrics: [long])
        }
        // One key bound to two apps is one role.
        let ring = try KeyRing.checked(ingest: [long + "@com.a", long + "@com.b"], read: [long + "r"], admin: [])
        #expect(ring.scope(of: long) == .ingest)
        #expect(!ring.protectsMetrics)
    }

    @Test("a key of fewer than 128 bits by the estimate is refused, however long; the message names the role and the bits, not the key")
    func keyEntropy() throws {
        #expect(KeyRing.estimatedBits(String(repeating: "a", count: 16)) < 5, "a repeated character counts once")
        #expect(KeyRing.estimatedBits("0123456789abcdef0123456789abcdef") > 165, "openssl rand -hex 16")
        #expect(KeyRing.estimatedBits("shk_" + String(repeating: "aB3-", count: 11)) > 256)
        #expect(
            throws: KeyRing.ConfigurationError(
                description: "an admin key carries at most 4 bits, fewer than 128: make one with `openssl rand -hex 32`"
            )
        ) {
            try KeyRing.checked(ingest: [], read: [], admin: [String(repeating: "a", count: 40)])
        }
        #expect(
            throws: KeyRing.ConfigurationError(
                description: "a read key carries at most 82 bits, fewer than 128: make one with `openssl rand -hex 32`"
            )
        ) {
            try KeyRing.checked(ingest: [], read: ["0123456789abcdef"], admin: [])
        }
        #expect(throws: KeyRing.ConfigurationError.self) { try KeyRing.checked(ingest: ["in-0123456789abcdef@com.a"], read: [], admin: []) }
        #expect(throws: KeyRing.ConfigurationError.self) { try KeyRing.checked(ingest: [], read: [], admin: [], metrics: ["metricsmetricsmetrics"]) }
        _ = try KeyRing.checked(ingest: ["in-0123456789abcdefghij@com.a"], read: ["0123456789abcdef0123456789abcdef"], admin: [])
    }

    @Test("the binary refuses to start with a short key or a guessable one, and says why without the key")
    func shortKeyAtStart() throws {
        let server = try? LiveServer(environment: ["SYNCHEALTH_INGEST_KEYS": "weak-key"])
        defer { server?.stop() }
        #expect(server == nil, "the server started with an 8-character key")
        let repeated = try? LiveServer(environment: ["SYNCHEALTH_ADMIN_KEYS": String(repeating: "a", count: 32)])
        defer { repeated?.stop() }
        #expect(repeated == nil, "the server started with 32 × a as its admin key")
    }

    @Test(
        "with a metrics key, /metrics (and /metrics/, //metrics) answers 401 without a key, 403 to an ingest key, 200 to the metrics, read or admin key"
    )
    func metricsKey() async throws {
        let metrics = "metrics-0123456789abcdefghijklmnop"
        let server = try LiveServer(environment: [
            "SYNCHEALTH_INGEST_KEYS": "ingest-0123456789abcdefghijklmnop", "SYNCHEALTH_READ_KEYS": "read-0123456789abcdefghijklmnop",
            "SYNCHEALTH_ADMIN_KEYS": "admin-0123456789abcdefghijklmnop", "SYNCHEALTH_METRICS_KEY": metrics,
        ])
        defer { server.stop() }
        // Other spellings of the path are the same route under the same rule.
        for path in ["/metrics", "/metrics/", "//metrics", "/metrics//", "///metrics/"] {
            #expect(try await server.request("GET", path).status == 401, "\(path)")
            #expect(try await server.request("GET", path, key: "ingest-0123456789abcdefghijklmnop").status == 403, "\(path)")
        }
        #expect(try await server.request("GET", "/metrics/", key: metrics).status == 200)
        for key in [metrics, "read-0123456789abcdefghijklmnop", "admin-0123456789abcdefghijklmnop"] {
            let response = try await server.request("GET", "/metrics", key: key)
            #expect(response.status == 200)
            #expect(String(decoding: response.body, as: UTF8.self).contains("# TYPE"))
        }
        // The metrics key reads nothing else.
        #expect(try await server.request("GET", "/v1/summary", key: metrics).status == 403)
        #expect(try await server.request("GET", "/livez").status == 200)
    }

    @Test("answers that carry a secret say Cache-Control: no-store; answers that do not, do not")
    func secretsNotCached() async throws {
        try await TestService(webhooks: .privateAllowed).test { client in
            let key = try await client.execute(
                uri: "/v1/keys",
                method: .post,
                headers: headers(adminKey),
                body: ByteBuffer(string: #"{"role": "read"}"#)
            )
            #expect(key.status == .created)
            #expect(key.headers[.cacheControl] == "no-store")
            let hook = try await client.execute(
                uri: "/v1/webhooks",
                method: .post,
                headers: headers(adminKey),
                body: ByteBuffer(string: #"{"url": "http://127.0.0.1:9/hook"}"#)
            )
            #expect(hook.status == .created, "\(String(buffer: hook.body))")
            #expect(hook.headers[.cacheControl] == "no-store")
            let list = try await client.get("/v1/keys", key: adminKey)
            #expect(list.headers[.cacheControl] == nil)
        }
    }

    @Test("a management body over its 64 KiB limit is 413 naming that limit, not the events endpoint's")
    func managementBodyLimit() async throws {
        try await TestService().test(.live) { client in
            let padding = String(repeating: "x", count: 70 * 1024)
            let response = try await client.execute(
                uri: "/v1/keys",
                method: .post,
                headers: headers(adminKey),
                body: ByteBuffer(string: #"{"role": "read", "description": "\#(padding)"}"#)
            )
            #expect(response.status == .contentTooLarge)
            #expect(String(buffer: response.body).contains("at most 65536 bytes"), "\(String(buffer: response.body))")
        }
    }

    @Test("without a metrics key, /metrics stays open")
    func metricsOpen() async throws {
        let server = try LiveServer(environment: ["SYNCHEALTH_INGEST_KEYS": "ingest-0123456789abcdefghijklmnop"])
        defer { server.stop() }
        #expect(try await server.request("GET", "/metrics").status == 200)
    }

    /// The permission bits of `path` other than the owner's.
    static func othersBits(_ path: String) -> Int? {
        guard let mode = (try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? NSNumber else { return nil }
        return mode.intValue & 0o077
    }

    @Test("the store, its WAL and shared memory, the journal, a backup and a restored store are for their owner alone")
    func fileModes() async throws {
        let admin = "admin-0123456789abcdefghijklmnop"
        let ingest = "ingest-0123456789abcdefghijklmnop"
        let server = try LiveServer(environment: ["SYNCHEALTH_INGEST_KEYS": ingest, "SYNCHEALTH_ADMIN_KEYS": admin])
        let body = String(buffer: batch(healthyEvents))
        #expect(try await server.request("POST", "/v1/events", key: ingest, body: Data(body.utf8)).status == 202)
        let names = try FileManager.default.contentsOfDirectory(atPath: server.dataDirectory)
        #expect(names.contains("synchealth.sqlite") && names.contains("synchealth.sqlite-wal"), "\(names)")
        for name in names {
            let path = (server.dataDirectory as NSString).appendingPathComponent(name)
            #expect(Self.othersBits(path) == 0, "\(name) is readable by others")
        }
        let backup = try await server.request("GET", "/v1/backup", key: admin)
        #expect(backup.status == 200)
        server.stop()

        // `synchealth backup` writes its copy for its user alone, and `synchealth restore` installs it so.
        let copy = temporaryDirectory() + "/copy.sqlite"
        try FileManager.default.createDirectory(atPath: (copy as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try backup.body.write(to: URL(fileURLWithPath: copy))
        chmod(copy, 0o644)
        let restored = temporaryDirectory()
        let process = Process()
        process.executableURL = builtBinary()
        process.arguments = ["restore", copy, "--data-dir", restored]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(Self.othersBits(restored + "/synchealth.sqlite") == 0, "the restored store is readable by others")
    }

    @Test("one backup at a time: a second is refused while the first holds the slot, and allowed once it is freed")
    func oneBackupAtATime() {
        let limits = BackupGuard()
        #expect(limits.begin())
        #expect(!limits.begin())
        limits.end()
        #expect(limits.begin())
        #expect(APIError.backupRunning.status == .conflict)
    }

    @Test("a download that makes no progress is cut off at the stall timeout; each write re-arms it")
    func stalledDownload() async throws {
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(loop: loop)
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).get()
        let watchdog = StallWatchdog(channel: channel, timeout: .seconds(60))
        watchdog.arm()
        loop.advanceTime(by: .seconds(59))
        watchdog.arm()  // a write completed
        loop.advanceTime(by: .seconds(59))
        #expect(channel.isActive, "re-armed: still open 118 s in")
        loop.advanceTime(by: .seconds(2))
        #expect(!channel.isActive, "no progress for 61 s: closed")
    }

    @Test("a disarmed watchdog never closes the connection")
    func disarmedWatchdog() async throws {
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(loop: loop)
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).get()
        let watchdog = StallWatchdog(channel: channel, timeout: .seconds(1))
        watchdog.arm()
        watchdog.disarm()
        loop.advanceTime(by: .seconds(10))
        #expect(channel.isActive)
    }
}
