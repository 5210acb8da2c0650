import NIOCore
import SyncHealthCore
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthPostgres
import SyncHealthStore
import SyncHealthTestSupport
import Synchronization
import Testing

@Suite("The live feed across replicas", .serialized, .enabled(if: PostgresTesting.baseURL != nil))
struct LiveFeedReplicaTests {
    /// The alerts a subscription receives until one of them is `state`, skipping summaries and heartbeats.
    static func alerts(
        _ subscription: LiveFeed.Subscription,
        through state: AlertState
    ) async -> [(id: String, alert: AlertRecord)] {
        var out: [(id: String, alert: AlertRecord)] = []
        for await message in subscription.messages {
            guard case .alerts(let list) = message.content else { continue }
            out += list
            if list.contains(where: { $0.alert.state == state }) { break }
        }
        return out
    }

    @Test("a transition on one replica reaches a reader of the other's feed once, in order, with the same id as on its own")
    func transitionsReachTheOtherReplica() async throws {
        let url = try await PostgresTesting.freshDatabase()
        @Sendable func store() throws -> MonitorStore { .shared(try PostgresStore(url: url, logger: testLogger())) }
        try await EngineHarness(store: try store()).run { a in
            try await EngineHarness(store: try store()).run { b in
                // A follower rebuilds its feed once it listens, and tells its readers `reset`: read after that.
                #expect(try await eventually { a.engine.feed.rebuilds > 0 && b.engine.feed.rebuilds > 0 }, "both replicas follow")
                let onA = a.engine.feed.subscribe(lastEventId: nil)
                let onB = b.engine.feed.subscribe(lastEventId: nil)
                try await a.post(EngineFlappingTests.fire(0))
                a.clock.advance(by: .seconds(1))
                try await a.post(EngineFlappingTests.recover(0))
                let seen = Mutex<(a: [String], b: [String], states: [AlertState])>(([], [], []))
                try await within(.seconds(20)) {
                    let fromA = await Self.alerts(onA, through: .resolved)
                    let fromB = await Self.alerts(onB, through: .resolved)
                    seen.withLock { $0 = (fromA.map(\.id), fromB.map(\.id), fromB.map(\.alert.state)) }
                }
                let (idsA, idsB, states) = seen.withLock { $0 }
                #expect(states == [.firing, .resolved], "the fire, then the resolve, each once: \(states)")
                #expect(idsB == idsA, "the same ids on both replicas, so a reader can resume on either")
                onA.cancel()
                onB.cancel()
            }
        }
    }
}
