import Foundation
import SyncHealthWebhooks

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
        let keys = GeneratedKeys(ingestKey: "shi_" + RandomToken.make(), adminKey: "sha_" + RandomToken.make())
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = try encoder.encode(keys)
        guard FileManager.default.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw CocoaError(.fileWriteUnknown)
        }
        return (keys, path, true)
    }
}
