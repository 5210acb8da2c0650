/// An event id's bytes as a member of a set: hashed in one call over the bytes, where `[UInt8]`'s own hashing feeds
/// the hasher one byte at a time (a 100-event batch hashed each id's bytes that way about 85 times, more than any
/// other line of its cost).
struct EventIdBytes: Hashable, Sendable {
    var bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}
