import Foundation
import SyncHealthBuildInfo
import SyncHealthTestSupport
import Testing

/// Runs `executable` with `arguments` and returns its exit status, standard output and standard error.
private func run(
    _ executable: String,
    _ arguments: [String],
    in directory: String? = nil,
    environment extra: [String: String] = [:]
) throws -> (status: Int32, output: String, error: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("SYNCHEALTH_") }.merging(extra) { $1 }
    let output = Pipe()
    let error = Pipe()
    process.standardOutput = output
    process.standardError = error
    try process.run()
    let out = output.fileHandleForReading.readDataToEndOfFile()
    let err = error.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: out, as: UTF8.self), String(decoding: err, as: UTF8.self))
}

/// The repository's root, from this file's place in it.
private let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

@Suite("The build's version, in every place that names it")
struct BuildInfoTests {
    @Test("a build says which commit it is made from, and a build outside a release says so in its version")
    func versionForm() {
        #expect(BuildInfo.commit.count == 40 && BuildInfo.commit.allSatisfy(\.isHexDigit), "\(BuildInfo.commit)")
        let parts = BuildInfo.version.split(separator: "+", maxSplits: 1)
        let core = parts[0].split(separator: "-", maxSplits: 1)[0].split(separator: ".")
        #expect(core.count == 3 && core.allSatisfy { Int($0) != nil }, "MAJOR.MINOR.PATCH: \(BuildInfo.version)")
        if !BuildInfo.isRelease {
            #expect(BuildInfo.version.hasSuffix("-dev+\(BuildInfo.commit.prefix(12))"), "\(BuildInfo.version)")
        }
    }

    @Test("--version and `version` print it; /readyz, /metrics and the dashboard's footer carry it")
    func everywhere() async throws {
        let binary = builtBinary().path
        let flag = try run(binary, ["--version"])
        #expect(flag.status == 0 && flag.output == "\(BuildInfo.version)\n", "\(flag)")
        let command = try run(binary, ["version"])
        #expect(command.status == 0 && command.output == "synchealth \(BuildInfo.version) (commit \(BuildInfo.commit))\n", "\(command)")

        let server = try LiveServer()
        try await server.waitUntilReady()
        let ready = try JSONSerialization.jsonObject(with: try await server.request("GET", "/readyz").body) as? [String: Any]
        #expect(ready?["version"] as? String == BuildInfo.version)
        #expect(ready?["releaseId"] as? String == BuildInfo.commit)
        let metrics = String(decoding: try await server.request("GET", "/metrics").body, as: UTF8.self)
        #expect(
            metrics.contains(#"synchealth_build_info{version="\#(BuildInfo.version)",commit="\#(BuildInfo.commit)"} 1"#),
            "\(metrics.prefix(400))"
        )
        let page = String(decoding: try await server.request("GET", "/").body, as: UTF8.self)
        #expect(page.contains(#"<span id="version">\#(BuildInfo.version)</span>"#))
        #expect(!page.contains("{{"))
        #expect(server.stop() == 0)
    }

    @Test("the rule: a tag or a RELEASES line on HEAD is a release; any other commit is the next patch's dev build")
    func rule() throws {
        let script = repositoryRoot.appendingPathComponent("Plugins/BuildInfoPlugin/build-info.sh").path
        let repo = temporaryDirectory()
        func git(_ arguments: String...) throws {
            let result = try run("/usr/bin/git", ["-c", "user.name=t", "-c", "user.email=t@example.com"] + arguments, in: repo)
            #expect(result.status == 0, "git \(arguments): \(result.error)")
        }
        func version(_ environment: [String: String] = [:]) throws -> (status: Int32, version: String, commit: String) {
            let result = try run("/bin/sh", [script, repo], environment: environment)
            let fields = result.output.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            return (result.status, fields.first ?? "", fields.count > 1 ? fields[1] : "")
        }
        func head() throws -> String { try run("/usr/bin/git", ["rev-parse", "HEAD"], in: repo).output.trimmingCharacters(in: .newlines) }

        try git("init", "-q", ".")
        try "# releases\n".write(toFile: repo + "/RELEASES", atomically: true, encoding: .utf8)
        try git("add", "RELEASES")
        try git("commit", "-q", "-m", "first")
        let first = try head()
        #expect(try version() == (0, "0.0.1-dev+\(first.prefix(12))", first), "no release yet")

        try "# releases\n0.1.0 \(first) 2026-11-28\n".write(toFile: repo + "/RELEASES", atomically: true, encoding: .utf8)
        #expect(try version().version == "0.1.0", "HEAD is listed")
        try git("commit", "-q", "-am", "record 0.1.0")
        let second = try head()
        #expect(try version().version == "0.1.1-dev+\(second.prefix(12))", "after a release: the next patch, in development")

        try git("tag", "v0.2.0")
        #expect(try version().version == "0.2.0", "a release tag on HEAD")
        #expect(try version(["SYNCHEALTH_BUILD_VERSION": "9.9.9"]).version == "9.9.9", "a build without git says what it is told")
        let refused = try version(["SYNCHEALTH_BUILD_VERSION": "1.0.0\"; evil"])
        #expect(refused.status != 0, "a version with other characters would break the Swift literal and the page")
    }
}

@Suite("scripts/release-server's checks")
struct ReleaseCheckTests {
    @Test("a release needs a later version, its changelog section and a clean tree; a released version is refused")
    func checks() throws {
        let clone = temporaryDirectory() + "/repo"
        let cloned = try run("/usr/bin/git", ["clone", "-q", "--no-hardlinks", repositoryRoot.path, clone])
        #expect(cloned.status == 0, "\(cloned.error)")
        func release(_ version: String) throws -> (status: Int32, output: String, error: String) {
            try run("/bin/bash", [clone + "/scripts/release-server", version, "--check"], in: clone)
        }
        func git(_ arguments: String...) throws {
            let result = try run("/usr/bin/git", ["-c", "user.name=t", "-c", "user.email=t@example.com"] + arguments, in: clone)
            #expect(result.status == 0, "git \(arguments): \(result.error)")
        }
        // The working tree's script and records, committed in the clone: what is tested is what is being changed.
        for file in ["scripts/release-server", "RELEASES", "CHANGELOG.md"] {
            let target = URL(fileURLWithPath: clone + "/" + file)
            try? FileManager.default.removeItem(at: target)
            try FileManager.default.copyItem(at: repositoryRoot.appendingPathComponent(file), to: target)
        }
        try git("commit", "-q", "--allow-empty", "-am", "the working tree's release files")
        let releases = try String(contentsOfFile: clone + "/RELEASES", encoding: .utf8)
        let last = try #require(releases.split(separator: "\n").last { !$0.hasPrefix("#") }?.split(separator: " ").first)
        #expect(try release(String(last)).error.contains("already lists"))
        #expect(try release("0.0.1").error.contains("not later than"))
        #expect(try release("1.0").error.contains("not MAJOR.MINOR.PATCH"))
        #expect(try release("99.0.0").error.contains("no section"))

        let changelog = clone + "/CHANGELOG.md"
        let text = try String(contentsOfFile: changelog, encoding: .utf8)
        try text.replacingOccurrences(of: "## [Unreleased]\n", with: "## [Unreleased]\n\n## [99.0.0] - 2099-01-01\n")
            .write(toFile: changelog, atomically: true, encoding: .utf8)
        #expect(try release("99.0.0").error.contains("the tree has changes"))
        try git("commit", "-q", "-am", "99.0.0")
        let ready = try release("99.0.0")
        #expect(ready.status == 0 && ready.output.contains("99.0.0 can be released"), "\(ready)")
        let tags = try run("/usr/bin/git", ["tag", "--list", "v99*"], in: clone)
        #expect(tags.output.isEmpty, "--check tags nothing")
    }
}
