#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A decoded `POST /v1/events` body: the device, its valid events, and the events that were rejected.
public struct EventBatch: Sendable, Equatable {
    /// The device.
    public var key: DeviceKey
    /// The optional device fields.
    public var info: DeviceInfo
    /// The valid events, in body order.
    public var events: [DeviceEvent]
    /// Invalid events: their index in the body and why.
    public var rejected: [Rejection]
    /// Whether the batch carried a valid App Attest assertion of the device's key. Never read from the body: the
    /// service sets it once it has verified the request.
    public var attested = false

    /// Creates a batch.
    public init(key: DeviceKey, info: DeviceInfo, events: [DeviceEvent], rejected: [Rejection] = []) {
        self.key = key
        self.info = info
        self.events = events
        self.rejected = rejected
    }

    /// An event judged invalid. It must not be retried.
    public struct Rejection: Sendable, Equatable, Codable {
        /// Index in the body's `events`.
        public var index: Int
        /// What is wrong.
        public var detail: String

        /// Creates a rejection.
        public init(index: Int, detail: String) {
            self.index = index
            self.detail = detail
        }
    }

    /// Limits on a batch.
    public enum Limits {
        /// Most events in one batch.
        public static let maxEvents = 1000
        /// Longest id (`deviceId`, `appId`, `eventId`, `activityId`).
        public static let maxIdLength = 128
        /// Longest optional device field.
        public static let maxFieldLength = 256
        /// Longest error message kept; longer ones are truncated.
        public static let maxMessageLength = 1024
    }
}

/// A body that is not a valid batch envelope. Maps to `400` with the listed errors.
public struct BatchValidationError: Error, Sendable, Equatable {
    /// One problem: a JSON pointer into the body and what is wrong there.
    public struct Item: Sendable, Equatable, Codable {
        /// JSON pointer (RFC 6901) to the offending value.
        public var pointer: String
        /// What is wrong.
        public var detail: String

        /// Creates an item.
        public init(pointer: String, detail: String) {
            self.pointer = pointer
            self.detail = detail
        }
    }

    /// The problems found.
    public var errors: [Item]

    /// Creates the error.
    public init(_ errors: [Item]) {
        self.errors = errors
    }

    init(_ pointer: String, _ detail: String) {
        self.errors = [Item(pointer: pointer, detail: detail)]
    }
}

extension DeviceKey {
    /// Whether `id` is a valid `deviceId` or `appId`: 1-128 characters of `A-Z a-z 0-9 . _ : -`.
    public static func isValidId(_ id: String) -> Bool {
        let utf8 = id.utf8
        guard !utf8.isEmpty, utf8.count <= EventBatch.Limits.maxIdLength else { return false }
        return utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
                || c == UInt8(ascii: ".") || c == UInt8(ascii: "_") || c == UInt8(ascii: ":") || c == UInt8(ascii: "-")
        }
    }
}
