import SyncHealthCore
import SyncHealthStore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthEngine

@Suite("Links to the dashboard in alert messages")
struct AlertMessageLinkTests {
    @Test("a device alert links to its device page; a fleet alert to its container's broken devices; none without a URL")
    func links() {
        let device = alert("al_1", .syncError, .firing, device: "dev 1")
        #expect(AlertMessage.dashboardLink(device, publicURL: "https://s.example.com//") == "https://s.example.com/#/device/com.example/dev%201")
        var fleet = AlertRecord(
            id: "al_2",
            kind: .fleetDegraded,
            state: .firing,
            deviceId: nil,
            appId: nil,
            containerId: "iCloud.a&b",
            startsAt: t0,
            endsAt: nil,
            summary: "s",
            detail: "d"
        )
        #expect(AlertMessage.dashboardLink(fleet, publicURL: "http://h:8080") == "http://h:8080/#/devices?broken=true&containerId=iCloud.a%26b")
        fleet.containerId = nil
        #expect(AlertMessage.dashboardLink(fleet, publicURL: "http://h") == "http://h/#/devices?broken=true")
        #expect(AlertMessage.dashboardLink(device, publicURL: nil) == nil)
        #expect(AlertMessage.dashboardLink(device, publicURL: " ") == nil)
    }
}
