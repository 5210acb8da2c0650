import Crypto
import Foundation

/// An app whose devices attest: the service's `appId` and the App ID (`TEAMID.bundleId`) Apple signs for.
public struct AppAttestApp: Sendable, Hashable {
    /// The `appId` devices send their events under.
    public var appId: String
    /// `TEAMID.bundleId`, as in the app's entitlements.
    public var appIdentifier: String
    public var mode: AppAttestMode

    /// Creates an app's attestation settings.
    public init(appId: String, appIdentifier: String, mode: AppAttestMode) {
        self.appId = appId
        self.appIdentifier = appIdentifier
        self.mode = mode
    }

    /// SHA-256 of the App ID: what the authenticator data's `rpIdHash` must be.
    public var rpIdHash: [UInt8] { Array(SHA256.hash(data: Array(appIdentifier.utf8))) }
}

/// What the service does with an app's batches that carry no valid assertion.
public enum AppAttestMode: String, Sendable, Hashable, CaseIterable {
    /// Every batch is accepted; devices show whether they are attested.
    case report
    /// A batch without a valid assertion is refused and nothing of it is applied.
    case require
}

/// `SYNCHEALTH_APP_ATTEST`: the apps whose devices attest, and what is done without an assertion.
public struct AppAttestPolicy: Sendable, Hashable {
    /// The apps, by `appId`.
    public var apps: [String: AppAttestApp]
    /// Whether keys of Apple's development environment are accepted (builds run from Xcode, TestFlight is production).
    public var allowsDevelopment: Bool

    /// A policy of the apps given.
    public init(apps: [AppAttestApp] = [], allowsDevelopment: Bool = false) {
        self.apps = Dictionary(apps.map { ($0.appId, $0) }, uniquingKeysWith: { _, last in last })
        self.allowsDevelopment = allowsDevelopment
    }

    /// Reads `appId=TEAMID.bundleId:mode[,…]`. The team id is Apple's ten characters; the bundle id is reverse-DNS.
    public init(parsing text: String, allowsDevelopment: Bool) throws(AppAttestPolicyError) {
        var apps: [AppAttestApp] = []
        for entry in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !entry.isEmpty {
            guard let equals = entry.firstIndex(of: "="), let colon = entry.lastIndex(of: ":"), equals < colon else {
                throw AppAttestPolicyError(entry: entry, reason: "expected appId=TEAMID.bundleId:mode")
            }
            let appId = String(entry[..<equals])
            let identifier = String(entry[entry.index(after: equals)..<colon])
            guard let mode = AppAttestMode(rawValue: String(entry[entry.index(after: colon)...])) else {
                throw AppAttestPolicyError(entry: entry, reason: "the mode must be report or require")
            }
            let parts = identifier.split(separator: ".", maxSplits: 1)
            guard !appId.isEmpty, parts.count == 2, parts[0].count == 10, parts[0].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }),
                !parts[1].isEmpty, parts[1].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") })
            else {
                throw AppAttestPolicyError(entry: entry, reason: "the App ID must be a 10-character team id, a dot and a bundle id")
            }
            guard !apps.contains(where: { $0.appId == appId }) else { throw AppAttestPolicyError(entry: entry, reason: "the app is listed twice") }
            apps.append(AppAttestApp(appId: appId, appIdentifier: identifier, mode: mode))
        }
        self.init(apps: apps, allowsDevelopment: allowsDevelopment)
    }

    /// The environments accepted.
    public var environments: Set<AppAttestEnvironment> { allowsDevelopment ? [.production, .development] : [.production] }
}

/// An entry of `SYNCHEALTH_APP_ATTEST` that could not be read.
public struct AppAttestPolicyError: Error, Sendable, Hashable, CustomStringConvertible {
    public var entry: String
    public var reason: String
    public var description: String { "\(entry): \(reason)" }
}
