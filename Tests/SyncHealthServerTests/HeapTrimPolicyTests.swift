import Testing

@testable import SyncHealthServer

@Suite("Heap trim policy")
struct HeapTrimPolicyTests {
    static let start = ContinuousClock.now
    static let mib = 1 << 20

    /// A reading `seconds` after the start, with `cpu` seconds used so far and `resident` MiB resident.
    static func reading(_ seconds: Double, cpu: Double, resident: Int) -> HeapTrimPolicy.Reading {
        HeapTrimPolicy.Reading(at: start + .seconds(seconds), cpu: .seconds(cpu), resident: resident * mib)
    }

    /// `shouldTrim`, in a form `#expect` can take.
    static func decide(_ policy: inout HeapTrimPolicy, _ reading: HeapTrimPolicy.Reading) -> HeapTrimPolicy.Trim? {
        policy.shouldTrim(after: reading)
    }

    @Test("the first reading only sets the baseline, however large the resident set")
    func firstReadingIsTheBaseline() {
        var policy = HeapTrimPolicy()
        #expect(Self.decide(&policy, Self.reading(0, cpu: 0, resident: 900)) == nil)
        #expect(Self.decide(&policy, Self.reading(2, cpu: 0, resident: 900)) == nil, "quiet, but nothing grew")
    }

    @Test("a quiet process whose resident set grew is trimmed once, then again only after it grows again")
    func quietAndGrownTrimsOnce() {
        var policy = HeapTrimPolicy()
        _ = policy.shouldTrim(after: Self.reading(0, cpu: 0, resident: 100))
        #expect(Self.decide(&policy, Self.reading(2, cpu: 0.1, resident: 180)) == .atRest)
        policy.trimmed(leaving: 120 * Self.mib, at: Self.start + .seconds(2))
        #expect(Self.decide(&policy, Self.reading(4, cpu: 0.2, resident: 125)) == nil, "grew 5 MiB since the trim")
        #expect(Self.decide(&policy, Self.reading(6, cpu: 0.3, resident: 130)) == nil)
        #expect(Self.decide(&policy, Self.reading(8, cpu: 0.4, resident: 140)) == .atRest, "grew 20 MiB since the trim")
    }

    @Test("a quiet process that has not grown by the threshold is not trimmed")
    func quietWithoutGrowthIsLeft() {
        var policy = HeapTrimPolicy(growth: 64 * Self.mib)
        _ = policy.shouldTrim(after: Self.reading(0, cpu: 0, resident: 100))
        for second in stride(from: 2.0, through: 20, by: 2) {
            #expect(Self.decide(&policy, Self.reading(second, cpu: 0, resident: 163)) == nil)
        }
        #expect(Self.decide(&policy, Self.reading(22, cpu: 0, resident: 164)) == .atRest)
    }

    @Test("under load the heap is trimmed only once the busy interval has passed since the last trim")
    func busyWaitsForTheBusyInterval() {
        var policy = HeapTrimPolicy(quietShare: 0.25, busyInterval: .seconds(60))
        _ = policy.shouldTrim(after: Self.reading(0, cpu: 0, resident: 100))
        // A third of a core is not quiet.
        for second in stride(from: 2.0, through: 58, by: 2) {
            #expect(Self.decide(&policy, Self.reading(second, cpu: second / 3, resident: 300)) == nil)
        }
        #expect(Self.decide(&policy, Self.reading(60, cpu: 20, resident: 300)) == .underLoad)
        policy.trimmed(leaving: 200 * Self.mib, at: Self.start + .seconds(60))
        #expect(Self.decide(&policy, Self.reading(62, cpu: 22, resident: 300)) == nil, "the interval counts from the trim")
        #expect(Self.decide(&policy, Self.reading(64, cpu: 22.2, resident: 300)) == .atRest, "quiet again: no wait")
    }

    @Test("once a load has passed the heap is trimmed once, though the resident set did not grow since the trim under load")
    func quietAfterBusyTrimsOnce() {
        var policy = HeapTrimPolicy(busyInterval: .seconds(10))
        _ = policy.shouldTrim(after: Self.reading(0, cpu: 0, resident: 100))
        #expect(Self.decide(&policy, Self.reading(10, cpu: 15, resident: 300)) == .underLoad, "busy, grown, 10 s")
        // The trim found the burst's memory still in use.
        policy.trimmed(leaving: 300 * Self.mib, at: Self.start + .seconds(10))
        #expect(Self.decide(&policy, Self.reading(11, cpu: 16.5, resident: 305)) == nil, "still busy")
        #expect(Self.decide(&policy, Self.reading(12, cpu: 16.6, resident: 305)) == .atRest, "quiet after busy")
        policy.trimmed(leaving: 200 * Self.mib, at: Self.start + .seconds(12))
        for second in 13...30 {
            #expect(Self.decide(&policy, Self.reading(Double(second), cpu: 16.6, resident: 200)) == nil, "idle: once is enough")
        }
    }

    @Test("quiet is measured between the last two readings, as a share of one core")
    func quietIsTheShareBetweenReadings() {
        var policy = HeapTrimPolicy(quietShare: 0.25, busyInterval: .seconds(3600))
        _ = policy.shouldTrim(after: Self.reading(0, cpu: 0, resident: 100))
        #expect(Self.decide(&policy, Self.reading(10, cpu: 2.6, resident: 200)) == nil, "0.26 of a core")
        #expect(Self.decide(&policy, Self.reading(20, cpu: 5.0, resident: 200)) == .atRest, "0.24 of a core")
    }
}
