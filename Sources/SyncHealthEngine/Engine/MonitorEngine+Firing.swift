import SyncHealthCore
import SyncHealthStore

/// The alerts that fire now, read page by page: what Alertmanager's refresh posts again, what a silence's end
/// releases, and what incidents group.
extension EngineReads {
    /// Every firing alert, with its device's context: a page of alerts, then their devices in one read.
    func firingAlerts() async throws -> [(AlertRecord, AlertContext)] {
        try await firingAlertDevices().map { alert, device in
            if let device { return (alert, AlertContext(device: device)) }
            // A release's alert carries its version, which silences on `appVersion` match.
            if alert.kind == .releaseRegression, let app = alert.appId, let version = alert.appVersion {
                return (alert, .release(ReleaseKey(appId: app, version: version)))
            }
            return (alert, .fleet)
        }
    }

    /// Every firing alert, with its device's record (`nil` for a container's fleet alert).
    func firingAlertDevices() async throws -> [(AlertRecord, DeviceRecord?)] {
        var out: [(AlertRecord, DeviceRecord?)] = []
        var cursor: Int64?
        repeat {
            let page = try await alerts(AlertQuery(state: .firing, limit: 1_000, cursor: cursor))
            let records = try await records(page.alerts.compactMap(\.deviceKey))
            for alert in page.alerts { out.append((alert, alert.deviceKey.flatMap { records[$0] })) }
            cursor = page.nextCursor
        } while cursor != nil
        return out
    }
}
