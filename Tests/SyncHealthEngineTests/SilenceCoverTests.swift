import SyncHealthCore
import SyncHealthEngine
import SyncHealthStore
import SyncHealthTestSupport
import Testing

/// When silences let a fire be told, from the silences alone.
@Suite("Silence cover: which silence's end tells a held fire")
struct SilenceCoverTests {
    static func at(_ seconds: Int64) -> Timestamp { testStart + .seconds(seconds) }

    static func silence(_ id: String, from: Int64, to: Int64, createdAt: Int64? = nil) -> Silence {
        Silence(id: id, matchers: Silence.Matchers(appId: "a"), startsAt: at(from), endsAt: at(to), comment: "", createdAt: at(createdAt ?? from))
    }

    @Test("a fire no silence held at its start is told at its start, whatever came later")
    func atStart() {
        let later = Self.silence("si_b", from: 20, to: 60)
        #expect(SilenceCover.telling(firedAt: Self.at(10), matching: [later], now: Self.at(30)) == .atStart)
        #expect(SilenceCover.telling(firedAt: Self.at(10), matching: [], now: Self.at(30)) == .atStart)
    }

    @Test("a silence made later with a start in the past did not hold what was told before it was made")
    func madeLater() {
        let backdated = Self.silence("si_a", from: 0, to: 60, createdAt: 20)
        #expect(SilenceCover.telling(firedAt: Self.at(10), matching: [backdated], now: Self.at(30)) == .atStart)
        #expect(SilenceCover.telling(firedAt: Self.at(25), matching: [backdated], now: Self.at(30)) == .held)
    }

    @Test("overlapping silences: the fire is held until the last of them ends, and told by that one's release")
    func overlapping() {
        let first = Self.silence("si_a", from: 0, to: 60)
        let second = Self.silence("si_b", from: 30, to: 90)
        #expect(SilenceCover.telling(firedAt: Self.at(10), matching: [first, second], now: Self.at(70)) == .held)
        #expect(SilenceCover.telling(firedAt: Self.at(10), matching: [first, second], now: Self.at(90)) == .release(id: "si_b", at: Self.at(90)))
        // A gap between them: the first's end tells it, and the second holds nothing it did not hold at its start.
        let apart = Self.silence("si_c", from: 70, to: 90)
        #expect(SilenceCover.telling(firedAt: Self.at(10), matching: [first, apart], now: Self.at(80)) == .release(id: "si_a", at: Self.at(60)))
    }

    @Test("silences that end together: the first by id tells it, so that one release does")
    func endingTogether() {
        let b = Self.silence("si_b", from: 0, to: 60)
        let a = Self.silence("si_a", from: 5, to: 60)
        #expect(SilenceCover.telling(firedAt: Self.at(10), matching: [b, a], now: Self.at(60)) == .release(id: "si_a", at: Self.at(60)))
    }
}
