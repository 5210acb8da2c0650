import Foundation
import SyncHealthCore
import SyncHealthStore

/// Slack's incoming webhooks (Mattermost and Rocket.Chat take the same): a headline in `text`, the facts in blocks,
/// advice and a dashboard link when there are.
enum SlackFormat: AlertFormat {
    /// People read it: one message an incident.
    static let defaultGrouping = WebhookGrouping.incident

    struct Message: Encodable {
        struct Text: Encodable {
            var type: String
            var text: String
        }
        struct Block: Encodable {
            var type: String
            var text: Text?
            var fields: [Text]?
            var elements: [Text]?
        }
        var text: String
        var blocks: [Block]
    }

    static func alertBody(
        _ alert: AlertRecord,
        change: AlertTransition.Change,
        context: AlertContext,
        subscription: WebhookSubscription,
        now: Timestamp,
        publicURL: String?
    ) -> String? {
        encode(message(alert, change: change, context: context, publicURL: publicURL))
    }

    static func incidentBody(
        _ incident: IncidentRecord,
        notice: IncidentBook.Notice,
        subscription: WebhookSubscription,
        now: Timestamp,
        publicURL: String?
    ) -> String? {
        encode(message(incident, notice: notice, publicURL: publicURL))
    }

    /// Text as Slack's mrkdwn must receive it: `&`, `<` and `>` escaped, as Slack documents, so that what a device
    /// sent (a container id, a version, an error's domain or message) can neither ping (`<!channel>`) nor link
    /// (`<https://…|label>`). Every value not written by this file goes through it.
    static func escaped(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "&") || $0 == UInt8(ascii: "<") || $0 == UInt8(ascii: ">") }) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 16)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    static func message(_ alert: AlertRecord, change: AlertTransition.Change, context: AlertContext, publicURL: String?) -> Message {
        let firing = change == .fire
        let headline = "\(firing ? "🔴" : "✅") \(alert.kind.rawValue) \(firing ? "firing" : "resolved"): \(escaped(alert.summary))"
        var fields: [Message.Text] = []
        if let device = alert.deviceId { fields.append(.init(type: "mrkdwn", text: "*Device*\n\(escaped(device))")) }
        if let app = alert.appId { fields.append(.init(type: "mrkdwn", text: "*App*\n\(escaped(app))")) }
        if let version = alert.appVersion { fields.append(.init(type: "mrkdwn", text: "*Release*\n\(escaped(version))")) }
        if let container = alert.containerId { fields.append(.init(type: "mrkdwn", text: "*Container*\n\(escaped(container))")) }
        if let error = context.error {
            fields.append(.init(type: "mrkdwn", text: "*Error*\n\(error.errorClass.rawValue): \(escaped(error.displayName))"))
        }
        fields.append(
            .init(type: "mrkdwn", text: firing ? "*Since*\n\(alert.startsAt.rfc3339)" : "*Resolved at*\n\((alert.endsAt ?? alert.startsAt).rfc3339)")
        )
        var blocks: [Message.Block] = [
            .init(type: "section", text: .init(type: "mrkdwn", text: "*\(headline)*\n\(escaped(alert.detail))")),
            .init(type: "section", fields: fields),
        ]
        if let advice = context.error?.advice {
            blocks.append(.init(type: "section", text: .init(type: "mrkdwn", text: "*What to do* (\(advice.who.rawValue)): \(escaped(advice.text))")))
        }
        let link = AlertMessage.dashboardLink(alert, publicURL: publicURL)
        if let link {
            let label =
                alert.deviceId != nil
                ? "Open the device on the dashboard"
                : alert.kind == .releaseRegression ? "Open the app's releases on the dashboard" : "Open the broken devices on the dashboard"
            blocks.append(.init(type: "section", text: .init(type: "mrkdwn", text: "<\(link)|\(label)>")))
        }
        blocks.append(.init(type: "context", elements: [.init(type: "mrkdwn", text: "SyncHealth alert `\(alert.id)`")]))
        // The plain URL in `text` too: Mattermost and Rocket.Chat show `text` and link it themselves.
        return Message(text: link.map { "\(headline)\n\($0)" } ?? headline, blocks: blocks)
    }

    static func message(_ incident: IncidentRecord, notice: IncidentBook.Notice, publicURL: String?) -> Message {
        let headline = escaped(IncidentMessage.headline(incident, notice: notice))
        var fields: [Message.Text] = [
            .init(type: "mrkdwn", text: "*Devices*\n\(incident.devices) (at most \(incident.peakDevices))"),
            .init(type: "mrkdwn", text: "*Since*\n\(incident.openedAt.rfc3339)"),
        ]
        if !incident.byVersion.isEmpty {
            fields.append(.init(type: "mrkdwn", text: "*App versions*\n\(escaped(IncidentMessage.versions(incident)))"))
        }
        if !incident.samples.isEmpty {
            fields.append(.init(type: "mrkdwn", text: "*For example*\n\(escaped(incident.samples.joined(separator: ", ")))"))
        }
        var blocks: [Message.Block] = [
            .init(type: "section", text: .init(type: "mrkdwn", text: "*\(headline)*")),
            .init(type: "section", fields: fields),
        ]
        if let advice = IncidentMessage.advice(incident.key) {
            blocks.append(.init(type: "section", text: .init(type: "mrkdwn", text: "*What to do* (\(advice.who.rawValue)): \(escaped(advice.text))")))
        }
        if let base = publicURL.map({ $0.hasSuffix("/") ? String($0.dropLast()) : $0 }) {
            blocks.append(.init(type: "section", text: .init(type: "mrkdwn", text: "<\(base)/#/alerts|Open the incidents on the dashboard>")))
        }
        blocks.append(.init(type: "context", elements: [.init(type: "mrkdwn", text: "SyncHealth incident `\(incident.id)`")]))
        return Message(text: headline, blocks: blocks)
    }
}
