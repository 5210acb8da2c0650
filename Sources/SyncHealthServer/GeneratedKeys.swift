import Foundation

/// The keys generated on first start when none are configured, kept in the data directory.
struct GeneratedKeys: Codable, Equatable {
    var ingestKey: String
    var adminKey: String

    static let fileName = "generated-keys.json"

    /// Loads the stored keys, or generates and stores new ones (owner-only permissions).
    static func loadOrCreate(in directory: String) throws -> (keys: GeneratedKeys, path: String, created: Bool) {
        let path = (directory as NSString).appendingPathComponent(fileName)
        if let data = FileManager.default.contents(atPath: path) {
            return (try JSONDecoder().decode(GeneratedKeys.self, from: data), path, false)
        }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let keys = GeneratedKeys(ingestKey: "shi_" + randomToken(), adminKey: "sha_" + randomToken())
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = try encoder.encode(keys)
        guard FileManager.default.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw CocoaError(.fileWriteUnknown)
        }
        return (keys, path, true)
    }

    /// 32 random bytes, base64url without padding.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}
