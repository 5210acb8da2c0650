import Crypto
import Dispatch
import Foundation
import SyncHealthStore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The system calls the journal makes on its active file: `pwrite`, `fdatasync` and `ftruncate`, or stand-ins
/// that fail (setting `errno`) for tests of what a failed write leaves behind.
struct JournalIO: Sendable {
    var write: @Sendable (Int32, UnsafeRawPointer?, Int, off_t) -> Int
    var sync: @Sendable (Int32) -> Int32
    var truncate: @Sendable (Int32, off_t) -> Int32

    static let system = JournalIO(write: { pwrite($0, $1, $2, $3) }, sync: { fdatasync($0) }, truncate: { ftruncate($0, $1) })
}
