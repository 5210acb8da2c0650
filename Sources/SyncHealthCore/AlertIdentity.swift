/// Deterministic alert ids: the same incident gets the same id on every replica and after every restart.
public enum AlertIdentity {
    /// The id of the incident of `kind` that started at `startsAt` on `subject`.
    public static func id(subject: AlertSubject, kind: AlertKind, startsAt: Timestamp) -> String {
        "al_" + digest([subject.identity, kind.rawValue, String(startsAt.microseconds)])
    }

    /// 32 hex digits identifying a sequence of strings (two 64-bit FNV-1a hashes); stable across runs and machines.
    public static func digest(_ parts: [String]) -> String {
        var bytes: [UInt8] = []
        for part in parts {
            bytes.append(contentsOf: part.utf8)
            bytes.append(0)
        }
        let high = fnv1a(bytes, basis: 0xcbf2_9ce4_8422_2325)
        let low = fnv1a(bytes.reversed(), basis: 0x84222325_cbf29ce4)
        return hex(high) + hex(low)
    }

    static func fnv1a(_ bytes: some Sequence<UInt8>, basis: UInt64) -> UInt64 {
        var hash = basis
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return hash
    }

    static func hex(_ value: UInt64) -> String {
        let s = String(value, radix: 16)
        return String(repeating: "0", count: 16 - s.count) + s
    }
}
