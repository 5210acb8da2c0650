import Foundation

/// The device's random id, created on first launch and kept with the queue. No identifierForVendor, nothing
/// personal: deleting the app (or its queue directory) makes a new device.
enum DeviceIdentity {
    /// The file the id is kept in, beside the queue.
    static let fileName = "device-id"

    /// The stored id, or a new one stored now when there is none. A file that cannot be read (a locked phone,
    /// too many open files) throws: only a missing file makes a new device.
    static func load(in directory: URL) throws -> String {
        let url = directory.appendingPathComponent(fileName)
        if let data = try StorageFiles.readIfPresent(url) {
            let stored = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if !stored.isEmpty { return stored }
        }
        let id = UUID().uuidString
        try StorageFiles.write(Data(id.utf8), to: url)
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
