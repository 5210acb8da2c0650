import Foundation

/// How the reporter's files are made and read. Every file and the directory carry the data protection class
/// `completeUntilFirstUserAuthentication`: readable and writable while the phone is locked, once it was unlocked
/// after a restart. An app whose default class is `complete` (the Data Protection capability) would otherwise give
/// them that class, and a silent push, a background refresh or a CKSyncEngine launch on a locked phone could not
/// open the queue. (Elsewhere than on Apple platforms the class is ignored.)
enum StorageFiles {
    private static var protection: [FileAttributeKey: Any] {
        [.protectionKey: FileProtectionType.completeUntilFirstUserAuthentication]
    }

    /// Makes `directory` (and its parents) with the reporter's protection class.
    static func makeDirectory(_ directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: protection)
    }

    /// Gives the files an earlier version made (with the app's default class) the reporter's class.
    static func protectExisting(_ urls: [URL]) {
        for url in urls where FileManager.default.fileExists(atPath: url.path) {
            try? FileManager.default.setAttributes(protection, ofItemAtPath: url.path)
        }
    }

    /// Makes an empty file at `url` with the reporter's protection class, unless there is one; `false` if it cannot.
    static func makeFileIfAbsent(_ url: URL) -> Bool {
        FileManager.default.fileExists(atPath: url.path)
            || FileManager.default.createFile(atPath: url.path, contents: nil, attributes: protection)
    }

    /// Writes `data` to `url` in one step (a new file renamed over the old), with the reporter's protection class.
    static func write(_ data: Data, to url: URL) throws {
        try data.write(to: url, options: [.atomic, .completeFileProtectionUntilFirstUserAuthentication])
    }

    /// The file's bytes; `nil` only when there is no such file. Any other failure (the phone locked before its first
    /// unlock, too many open files) throws: it says nothing about whether the file exists, so the caller must not
    /// make a new identity or key in its place, only try again later.
    static func readIfPresent(_ url: URL) throws -> Data? {
        do {
            return try Data(contentsOf: url)
        } catch {
            if isNoSuchFile(error) { return nil }
            throw error
        }
    }

    static func isNoSuchFile(_ error: any Error) -> Bool {
        let error = error as NSError
        switch error.domain {
        case NSCocoaErrorDomain:
            if [CocoaError.fileReadNoSuchFile.rawValue, CocoaError.fileNoSuchFile.rawValue].contains(error.code) { return true }
            return (error.userInfo[NSUnderlyingErrorKey] as? NSError).map(isNoSuchFile) ?? false
        case NSPOSIXErrorDomain:
            return error.code == Int(ENOENT)
        default:
            return false
        }
    }
}
