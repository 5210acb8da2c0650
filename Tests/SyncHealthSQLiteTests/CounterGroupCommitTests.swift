import Synchronization
import Testing

@testable import SyncHealthSQLite

@Suite("App Attest's counter moves are written in groups")
struct CounterGroupCommitTests {
    @Test("a hundred moves at once are written in a few groups, each caller gets its own answer, and a failed write fails its group only")
    func groups() async throws {
        let groups = Mutex<[[Int]]>([])
        let failNext = Mutex(false)
        let commit = CounterGroupCommit<Int> { moves in
            groups.withLock { $0.append(moves) }
            try await Task.sleep(for: .milliseconds(20))
            if failNext.withLock({ flag in
                defer { flag = false }
                return flag
            }) {
                throw CancellationError()
            }
            // Even moves win, odd ones lose: each caller must get its own.
            return moves.map { $0 % 2 == 0 }
        }
        let answers = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
            for move in 0..<100 { group.addTask { (move, try await commit.submit(move)) } }
            return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        #expect(answers.count == 100)
        #expect(answers.allSatisfy { $0.value == ($0.key % 2 == 0) })
        let written = groups.withLock { $0 }
        #expect(written.flatMap { $0 }.sorted() == Array(0..<100), "every move written once")
        #expect(written.count < 20, "\(written.count) groups for 100 moves")

        failNext.withLock { $0 = true }
        await #expect(throws: CancellationError.self) { try await commit.submit(7) }
        #expect(try await commit.submit(8), "the next group is written")
    }
}
