import Foundation
import SyncHealthCore
import SyncHealthStore

/// What the formats' alert messages share: the dispatch to the subscription's format, severity, the dashboard link.
/// Each format's body is in `Delivery/Formats/` (`AlertFormat`).
enum AlertMessage {
    /// The body for `format`; `nil` if it cannot be written (it then is not sent).
    static func body(
        _ format: WebhookFormat,
        alert: AlertRecord,
        change: AlertTransition.Change,
        context: AlertContext,
        subscription: WebhookSubscription,
        now: Timestamp,
        publicURL: String? = nil
    ) -> String? {
        format.alertFormat.alertBody(alert, change: change, context: context, subscription: subscription, now: now, publicURL: publicURL)
    }

    /// PagerDuty's severity, and Alertmanager's `severity` label.
    static func severity(_ alert: AlertRecord, _ context: AlertContext) -> String {
        // A release that breaks sync breaks it for everyone who updates.
        guard alert.kind != .releaseRegression else { return "error" }
        return switch context.errorClass {
        case .dataLoss?: "critical"
        case .developer?: "error"
        default: "warning"
        }
    }

    /// The alert's page on the dashboard under `publicURL`: the device, or a fleet alert's broken devices.
    static func dashboardLink(_ alert: AlertRecord, publicURL: String?) -> String? {
        guard var base = publicURL?.trimmingCharacters(in: .whitespaces), !base.isEmpty else { return nil }
        while base.hasSuffix("/") { base.removeLast() }
        let encode = { (text: String) in
            text.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed.subtracting(["&", "=", "#", "?", "/"])) ?? text
        }
        if let appId = alert.appId, let deviceId = alert.deviceId {
            return "\(base)/#/device/\(encode(appId))/\(encode(deviceId))"
        }
        if alert.kind == .releaseRegression, let appId = alert.appId {
            return "\(base)/#/releases?appId=\(encode(appId))"
        }
        return "\(base)/#/devices?broken=true" + (alert.containerId.map { "&containerId=\(encode($0))" } ?? "")
    }
}
