import Foundation
import GRDB
import SyncHealthStore

/// Migration v4's conversion, frozen: the ids of `seen_events` become buckets in the format of that version.
///
/// A migration must write what its version wrote, whatever the application's `EventIdBuckets` becomes later (a
/// later format change comes with a migration of its own), so this is a copy, not a call.
enum MigrationV4 {
    /// A bucket's size at v4.
    static let maxBytes = 2048

    static func run(_ db: Database) throws {
        let insert = try db.makeStatement(sql: "INSERT INTO event_id_buckets (device_hash, lo, oldest, entries) VALUES (?, ?, ?, ?)")
        func flush(_ hash: Int64, _ bytes: [UInt8], _ starts: [Int]) throws {
            for piece in pieces(bytes, starts: starts) {
                try insert.execute(arguments: [hash, Data(piece.lo), piece.oldest, Data(piece.bytes)])
            }
        }
        // SQLite orders text by its bytes, as buckets do.
        let rows = try Row.fetchCursor(db, sql: "SELECT device_hash, event_id, recorded_at FROM seen_events ORDER BY device_hash, event_id")
        var current: Int64?
        var bytes: [UInt8] = []
        var starts: [Int] = []
        while let row = try rows.next() {
            let hash: Int64 = row[0]
            let id = Array((row[1] as String).utf8)
            let at: Int64 = row[2]
            if hash != current, let previous = current {
                try flush(previous, bytes, starts)
                bytes = []
                starts = []
            }
            current = hash
            starts.append(bytes.count)
            // An entry: the id's length (2 bytes, little-endian), the id, the time (8 bytes, little-endian).
            bytes.append(UInt8(truncatingIfNeeded: id.count))
            bytes.append(UInt8(truncatingIfNeeded: id.count >> 8))
            bytes.append(contentsOf: id)
            withUnsafeBytes(of: at.littleEndian) { bytes.append(contentsOf: $0) }
        }
        if let current { try flush(current, bytes, starts) }
    }

    /// Cuts one device's entries into pieces of about `maxBytes`, each with its oldest time and its first id as
    /// `lo` (the first piece's `lo` is empty).
    static func pieces(_ bytes: [UInt8], starts: [Int]) -> [(lo: [UInt8], oldest: Int64, bytes: [UInt8])] {
        let count = max(1, (bytes.count + maxBytes - 1) / maxBytes)
        var pieces: [(lo: [UInt8], oldest: Int64, bytes: [UInt8])] = []
        var pieceStart = 0
        var oldest = Int64.max
        func cut(upTo end: Int) {
            let length = Int(bytes[pieceStart]) | Int(bytes[pieceStart + 1]) << 8
            let lo = pieces.isEmpty ? [] : Array(bytes[(pieceStart + 2)..<(pieceStart + 2 + length)])
            pieces.append((lo, oldest == .max ? 0 : oldest, Array(bytes[pieceStart..<end])))
        }
        for (i, start) in starts.enumerated() {
            if start > pieceStart, start >= (pieces.count + 1) * bytes.count / count {
                cut(upTo: start)
                pieceStart = start
                oldest = .max
            }
            let entryEnd = i + 1 < starts.count ? starts[i + 1] : bytes.count
            var time: UInt64 = 0
            for k in 0..<8 { time |= UInt64(bytes[entryEnd - 8 + k]) << (8 * UInt64(k)) }
            oldest = min(oldest, Int64(bitPattern: time))
        }
        cut(upTo: bytes.count)
        return pieces
    }
}
