import Foundation
public import SyncHealthCore

/// A silence, as Alertmanager's: alerts it matches still fire, resolve and are listed, but nothing is delivered for
/// them while it is active.
public struct Silence: Sendable, Hashable {
    /// What a silence matches: every matcher given must equal the alert's (or its device's) value.
    public struct Matchers: Sendable, Hashable, Codable {
        public var appId: String?
        public var containerId: String?
        public var deviceId: String?
        public var kind: AlertKind?
        public var appVersion: String?
        public var osVersion: String?
        public var platform: String?

        /// Matchers; at least one should be given.
        public init(
            appId: String? = nil,
            containerId: String? = nil,
            deviceId: String? = nil,
            kind: AlertKind? = nil,
            appVersion: String? = nil,
            osVersion: String? = nil,
            platform: String? = nil
        ) {
            self.appId = appId
            self.containerId = containerId
            self.deviceId = deviceId
            self.kind = kind
            self.appVersion = appVersion
            self.osVersion = osVersion
            self.platform = platform
        }

        /// Whether no matcher is given (such a silence would match everything, and is refused).
        public var isEmpty: Bool { self == Matchers() }

        /// Whether an alert, with its device's info, matches every matcher given.
        public func matches(_ alert: AlertRecord, info: DeviceInfo?) -> Bool {
            func same(_ matcher: String?, _ value: String?) -> Bool { matcher == nil || matcher == value }
            return same(appId, alert.appId) && same(containerId, alert.containerId) && same(deviceId, alert.deviceId)
                && (kind == nil || kind == alert.kind) && same(appVersion, info?.appVersion) && same(osVersion, info?.osVersion)
                && same(platform, info?.platform)
        }
    }

    /// `si_` + random.
    public var id: String
    public var matchers: Matchers
    public var startsAt: Timestamp
    /// When it ends; `DELETE` moves it to the time of the request.
    public var endsAt: Timestamp
    public var comment: String
    public var createdAt: Timestamp
    /// Whether the deliveries it held back have been released (after it ended).
    public var released: Bool

    /// Creates a silence.
    public init(id: String, matchers: Matchers, startsAt: Timestamp, endsAt: Timestamp, comment: String, createdAt: Timestamp, released: Bool = false)
    {
        self.id = id
        self.matchers = matchers
        self.startsAt = startsAt
        self.endsAt = endsAt
        self.comment = comment
        self.createdAt = createdAt
        self.released = released
    }

    /// Two copies of one silence made one: a silence only ever ends earlier (`DELETE`) and becomes released, so the
    /// earlier end and either release win. Writers and caches that merge cannot undo each other's changes, whatever
    /// order replicas write and read in.
    public func merged(with other: Silence) -> Silence {
        var merged = self
        merged.endsAt = min(endsAt, other.endsAt)
        merged.released = released || other.released
        return merged
    }

    /// Whether it is in force at `now`.
    public func isActive(at now: Timestamp) -> Bool { startsAt <= now && now < endsAt }

    /// The stored JSON of the matchers.
    public var matchersJSON: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode(matchers)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// Matchers read back from their stored JSON.
    public static func matchers(json: String) -> Matchers {
        (try? JSONDecoder().decode(Matchers.self, from: Data(json.utf8))) ?? Matchers()
    }
}

/// Where silences are kept: a restart keeps them, and replicas sharing a store agree on them.
public protocol SilenceStore: Sendable {
    /// Every silence, expired ones included, oldest first.
    func silences() async throws -> [Silence]
    /// Inserts or replaces a silence.
    func saveSilence(_ silence: Silence) async throws
    /// Writes outbox messages outside a group commit (deliveries a silence held back); ids already there are kept.
    func enqueue(_ messages: [OutboxMessage]) async throws
}
