import Foundation
import Testing

/// Apple's required-reason API categories, each with the calls that put a package in it (Apple's "Describing use
/// of required reason API"): a source file that calls one must be declared in the manifest with a reason.
let requiredReasonCategories: [String: [String]] = [
    "NSPrivacyAccessedAPICategoryFileTimestamp": [
        "creationDate", "modificationDate", "fileModificationDate", "contentModificationDateKey", "creationDateKey",
        "getattrlist", "getattrlistbulk", "fgetattrlist", "stat(", "fstat(", "fstatat(", "lstat(", "getattrlistat",
    ],
    "NSPrivacyAccessedAPICategorySystemBootTime": ["systemUptime", "mach_absolute_time"],
    "NSPrivacyAccessedAPICategoryDiskSpace": [
        "volumeAvailableCapacityKey", "volumeAvailableCapacityForImportantUsageKey",
        "volumeAvailableCapacityForOpportunisticUsageKey", "volumeTotalCapacityKey", "systemFreeSize", "systemSize",
        "statfs(", "statvfs(", "fstatfs(", "fstatvfs(", "getattrlist",
    ],
    "NSPrivacyAccessedAPICategoryActiveKeyboards": ["activeInputModes"],
    "NSPrivacyAccessedAPICategoryUserDefaults": ["UserDefaults", "NSUserDefaults"],
]

/// The package's directory, from this file's path.
let clientPackageDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

@Suite("The privacy manifest")
struct PrivacyManifestTests {
    func manifest() throws -> [String: Any] {
        let url = clientPackageDirectory.appendingPathComponent("Sources/SyncHealthClient/PrivacyInfo.xcprivacy")
        let data = try Data(contentsOf: url)
        return try #require(try PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any])
    }

    @Test("it parses as a property list: no tracking, a device id, diagnostics and app launches, not linked to the user, for app functionality")
    func collectedData() throws {
        let plist = try manifest()
        #expect(plist["NSPrivacyTracking"] as? Bool == false)
        #expect((plist["NSPrivacyTrackingDomains"] as? [String])?.isEmpty == true)
        let collected = try #require(plist["NSPrivacyCollectedDataTypes"] as? [[String: Any]])
        let types = collected.compactMap { $0["NSPrivacyCollectedDataType"] as? String }
        // Product interaction: the launch heartbeat (`heartbeatOnStart`) records an app launch, which Apple's
        // definition of the type names.
        #expect(
            Set(types) == [
                "NSPrivacyCollectedDataTypeDeviceID", "NSPrivacyCollectedDataTypeOtherDiagnosticData",
                "NSPrivacyCollectedDataTypeProductInteraction",
            ]
        )
        for entry in collected {
            #expect(entry["NSPrivacyCollectedDataTypeLinked"] as? Bool == false)
            #expect(entry["NSPrivacyCollectedDataTypeTracking"] as? Bool == false)
            #expect(entry["NSPrivacyCollectedDataTypePurposes"] as? [String] == ["NSPrivacyCollectedDataTypePurposeAppFunctionality"])
        }
    }

    @Test("it declares, with a reason each, exactly the required-reason API categories that the sources call")
    func requiredReasons() throws {
        let sources = clientPackageDirectory.appendingPathComponent("Sources")
        var text = ""
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)
        while let file = files?.nextObject() as? URL {
            if file.pathExtension == "swift" { text += try String(contentsOf: file, encoding: .utf8) }
        }
        #expect(text.contains("SyncHealthReporter"), "the sources were read")
        let used = Set(requiredReasonCategories.filter { _, calls in calls.contains { text.contains($0) } }.keys)
        let declared = try #require(manifest()["NSPrivacyAccessedAPITypes"] as? [[String: Any]])
        let declaredCategories = Set(declared.compactMap { $0["NSPrivacyAccessedAPIType"] as? String })
        #expect(declaredCategories == used, "categories the sources call: \(used.sorted())")
        for entry in declared {
            #expect((entry["NSPrivacyAccessedAPITypeReasons"] as? [String])?.isEmpty == false)
        }
    }
}
