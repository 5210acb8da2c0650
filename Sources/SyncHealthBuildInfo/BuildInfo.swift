/// What this binary is: the release it belongs to and the commit it was built from, written in at build time
/// (`Plugins/BuildInfoPlugin/build-info.sh`). Every place that names the version reads it here: `synchealth
/// --version`, `/readyz`, the `synchealth_build_info` gauge, webhook deliveries' `User-Agent` and the dashboard.
public enum BuildInfo {
    /// The semantic version: `0.1.0` for a release, `0.1.1-dev+3f2a9c1b0d4e` for a build of any other commit.
    public static let version = generatedVersion

    /// The full commit hash the binary was built from, or `unknown` for a build without the repository.
    public static let commit = generatedCommit

    /// Whether this is a release's build: its version has no pre-release or build part.
    public static var isRelease: Bool { !version.contains("-") && !version.contains("+") }

    /// The `User-Agent` of what the service sends: `SyncHealth/0.1.0`.
    public static var userAgent: String { "SyncHealth/\(version)" }
}
