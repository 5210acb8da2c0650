import Foundation

/// The device's random id, created on first launch and kept with the queue. No identifierForVendor, nothing
/// personal: deleting the app (or its queue directory) makes a new device.
enum DeviceIdentity {
    /// The file the id is kept in, beside the queue.
    static let fileName = "device-id"

    static func load(in directory: URL) throws -> String {
        let url = directory.appendingPathComponent(fileName)
        if let stored = try? String(contentsOf: url, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines), !stored.isEmpty {
            return stored
        }
        let id = UUID().uuidString
        try Data(id.utf8).write(to: url, options: .atomic)
        return id
    }

    /// The platform as the server's `platform` field names it. A Mac Catalyst app is `macCatalyst`, not iOS: it
    /// runs on a Mac, with the Mac's iCloud account and network (`os(iOS)` is true for it).
    static var platform: String {
        #if targetEnvironment(macCatalyst)
        "macCatalyst"
        #elseif os(iOS)
        "iOS"
        #elseif os(macOS)
        "macOS"
        #elseif os(tvOS)
        "tvOS"
        #elseif os(watchOS)
        "watchOS"
        #elseif os(visionOS)
        "visionOS"
        #elseif os(Linux)
        "Linux"
        #else
        "unknown"
        #endif
    }

    static var osVersion: String {
        let v = ProcessInfo.processInfo.operatingSystemVersion
        return "\(v.majorVersion).\(v.minorVersion).\(v.patchVersion)"
    }
}
