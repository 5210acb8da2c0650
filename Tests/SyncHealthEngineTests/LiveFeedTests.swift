import SyncHealthCore
import SyncHealthStore
import SyncHealthTestSupport
import Synchronization
import Testing

@testable import SyncHealthEngine

@Suite("The live feed: replay, resume, summaries, slow readers")
struct LiveFeedTests {
    /// What a subscription receives, until `count` items came (an alert each, any other message one).
    static func drain(_ subscription: LiveFeed.Subscription, count: Int) async -> [LiveFeed.Content] {
        var out: [LiveFeed.Content] = []
        var items = 0
        var iterator = subscription.messages.makeAsyncIterator()
        while items < count, let message = await iterator.next() {
            out.append(message.content)
            if case .alerts(let list) = message.content { items += list.count } else { items += 1 }
        }
        return out
    }

    static func alertIds(_ contents: [LiveFeed.Content]) -> [String] {
        contents.flatMap { content -> [String] in
            guard case .alerts(let list) = content else { return [] }
            return list.map(\.alert.id)
        }
    }

    static func eventIds(_ contents: [LiveFeed.Content]) -> [String] {
        contents.flatMap { content -> [String] in
            guard case .alerts(let list) = content else { return [] }
            return list.map(\.id)
        }
    }

    @Test("a reader that reconnects with its last id gets exactly the transitions it missed, in order")
    func resumeWithoutLossOrRepeat() async {
        let feed = LiveFeed()
        let first = feed.subscribe(lastEventId: nil)
        feed.publish([alert("a1", .syncError, .firing), alert("a2", .notSyncing, .firing)])
        let seen = await Self.drain(first, count: 2)
        #expect(Self.alertIds(seen) == ["a1", "a2"])
        let lastId = Self.eventIds(seen)[0]
        first.cancel()

        // While away: two more. The reader saw only a1 (say it was cut off before a2 reached it).
        feed.publish([alert("a1", .syncError, .resolved), alert("a3", .syncStalled, .firing)])
        let again = feed.subscribe(lastEventId: lastId)
        feed.publish([alert("a4", .exportAtRisk, .firing)])
        let resumed = await Self.drain(again, count: 4)
        #expect(Self.alertIds(resumed) == ["a2", "a1", "a3", "a4"])
        #expect(Set(Self.eventIds(resumed)).count == 4)
        #expect(!Self.eventIds(resumed).contains(lastId))
    }

    @Test("an erasure sends every reader a reset, and a reconnecting reader is not replayed the erased device's transitions")
    func erasureResetsAndLeavesTheReplay() async {
        let feed = LiveFeed()
        let reader = feed.subscribe(lastEventId: nil)
        feed.publish([alert("a1", .syncError, .firing, device: "gone"), alert("a2", .syncError, .firing, device: "stays")])
        let seen = await Self.drain(reader, count: 2)
        let firstId = Self.eventIds(seen)[0]
        feed.erased([DeviceKey(appId: "com.example", deviceId: "gone")])
        let after = await Self.drain(reader, count: 1)
        guard case .reset = after.first else {
            Issue.record("expected a reset, got \(after)")
            return
        }
        feed.publish([alert("a3", .syncError, .resolved, device: "gone")])
        let gone = await Self.drain(feed.subscribe(lastEventId: firstId), count: 1)
        guard case .reset = gone.first else {
            Issue.record("a1 left the replay: expected a reset, got \(gone)")
            return
        }
        let resumed = await Self.drain(feed.subscribe(lastEventId: Self.eventIds(seen)[1]), count: 1)
        #expect(Self.alertIds(resumed) == ["a3"], "what came after the erasure stays")
    }

    @Test("an unknown id, and an id older than the replay window, answer reset; the oldest kept resumes")
    func resetWhenResumeIsImpossible() async {
        let feed = LiveFeed(replayCapacity: 2)
        feed.publish([alert("a1", .syncError, .firing), alert("a2", .syncError, .firing), alert("a3", .syncError, .firing)])
        for lastId in ["a1.f", "a9.f", "garbage", "a2.r"] {
            let s = feed.subscribe(lastEventId: lastId)
            let first = await Self.drain(s, count: 1)
            guard case .reset = first.first else {
                Issue.record("\(lastId): expected reset, got \(first)")
                continue
            }
            s.cancel()
        }
        // a2's fire is the oldest resumable point: what came after it (a3) is still kept.
        let ok = feed.subscribe(lastEventId: "a2.f")
        feed.publish([alert("a4", .syncError, .firing)])
        #expect(Self.alertIds(await Self.drain(ok, count: 2)) == ["a3", "a4"])
    }

    @Test("ids are the transitions' own: the same on another feed that saw the same transitions, and each kept once")
    func durableIds() async {
        let a = LiveFeed()
        let b = LiveFeed()
        let transitions = [alert("a1", .syncError, .firing), alert("a2", .notSyncing, .firing), alert("a1", .syncError, .resolved)]
        a.publish(transitions)
        // B heard of them in two parts, one of them twice (its own commit, and the database's notice).
        b.publish(Array(transitions.prefix(2)))
        b.publish(transitions)
        let onA = await Self.drain(a.subscribe(lastEventId: "a1.f"), count: 2)
        let onB = await Self.drain(b.subscribe(lastEventId: "a1.f"), count: 2)
        #expect(Self.eventIds(onA) == ["a2.f", "a1.r"])
        #expect(Self.eventIds(onB) == Self.eventIds(onA), "a reader resumes on another replica")
    }

    @Test("rebuild keeps the store's last transitions, so that a reader resumes after a restart; readers get reset")
    func rebuildAfterRestart() async {
        let before = LiveFeed()
        before.publish([alert("a1", .syncError, .firing), alert("a2", .syncError, .firing)])
        let restarted = LiveFeed(replayCapacity: 3)
        let reader = restarted.subscribe(lastEventId: nil)
        restarted.rebuild(recent: [alert("a0", .syncError, .firing), alert("a1", .syncError, .firing), alert("a2", .syncError, .firing)])
        let told = await Self.drain(reader, count: 1)
        guard case .reset = told.first else {
            Issue.record("expected reset, got \(told)")
            return
        }
        restarted.publish([alert("a2", .syncError, .resolved)])
        #expect(Self.eventIds(await Self.drain(restarted.subscribe(lastEventId: "a1.f"), count: 2)) == ["a2.f", "a2.r"])
    }

    @Test("summaries: only the scopes that changed since the last publication, emptied ones as zero")
    func summaryChanges() async {
        let feed = LiveFeed()
        var one = FleetCounts()
        one.devices = 1
        var two = FleetCounts()
        two.devices = 2
        feed.publishSummaries([.all: two, FleetScope(appId: "a"): one, FleetScope(appId: "b"): one])
        let s = feed.subscribe(lastEventId: nil)
        feed.publishSummaries([.all: two, FleetScope(appId: "a"): two])
        feed.publishSummaries([.all: two, FleetScope(appId: "a"): two])
        feed.keepalive()
        let got = await Self.drain(s, count: 2)
        guard got.count == 2, case .summaries(let changed) = got[0], case .keepalive = got[1] else {
            Issue.record("unexpected \(got)")
            return
        }
        let byScope = Dictionary(uniqueKeysWithValues: changed.map { ($0.scope, $0.counts.devices) })
        #expect(byScope == [FleetScope(appId: "a"): 2, FleetScope(appId: "b"): 0])
    }

    @Test("a reader that falls behind by more than the buffer is cut off, and the others are not")
    func slowReaderIsCutOff() async {
        let feed = LiveFeed(bufferLimit: 3)
        let cut = Mutex(0)
        let slow = feed.subscribe(lastEventId: nil) { cut.withLock { $0 += 1 } }
        let fast = feed.subscribe(lastEventId: nil)
        var fastSeen = 0
        var fastIterator = fast.messages.makeAsyncIterator()
        for i in 0..<10 {
            feed.publish([alert("a\(i)", .syncError, .firing)])
            if await fastIterator.next() != nil { fastSeen += 1 }
        }
        #expect(fastSeen == 10)
        #expect(cut.withLock { $0 } == 1)
        #expect(feed.subscriberCount == 1)
        // The slow reader's stream ends after what was buffered.
        var slowCount = 0
        for await _ in slow.messages { slowCount += 1 }
        #expect(slowCount == 3)
    }

    @Test("a burst of transitions is cut into messages of at most 100 alerts, in order")
    func burstsAreChunked() async {
        let feed = LiveFeed(alertBudget: 1_000)
        let s = feed.subscribe(lastEventId: nil)
        feed.publish((0..<250).map { alert("a\($0)", .syncError, .firing) })
        var iterator = s.messages.makeAsyncIterator()
        var sizes: [Int] = []
        var ids: [String] = []
        for _ in 0..<3 {
            guard case .alerts(let list)? = await iterator.next()?.content else { break }
            sizes.append(list.count)
            ids += list.map(\.alert.id)
        }
        #expect(sizes == [100, 100, 50])
        #expect(ids == (0..<250).map { "a\($0)" })
    }

    @Test("finishing ends every stream, and a subscription made after ends at once")
    func finishAll() async {
        let feed = LiveFeed()
        let s = feed.subscribe(lastEventId: nil)
        feed.finishAll()
        for await _ in s.messages { Issue.record("no message expected") }
        let late = feed.subscribe(lastEventId: nil)
        for await _ in late.messages { Issue.record("no message expected") }
        #expect(feed.subscriberCount == 0)
    }

    @Test("a message's wire form is made once for every reader")
    func encodedOnce() async {
        let feed = LiveFeed()
        let a = feed.subscribe(lastEventId: nil)
        let b = feed.subscribe(lastEventId: nil)
        feed.keepalive()
        let calls = Mutex(0)
        for s in [a, b] {
            var iterator = s.messages.makeAsyncIterator()
            let message = await iterator.next()
            _ = message?.encoded { _ in
                calls.withLock { $0 += 1 }
                return [1]
            }
        }
        #expect(calls.withLock { $0 } == 1)
    }
}

@Suite("The live feed in a storm: budgets, coalescing, reset")
struct LiveFeedStormTests {
    /// Everything a subscription receives until its stream ends.
    static func collect(_ subscription: LiveFeed.Subscription) async -> [LiveFeed.Content] {
        var out: [LiveFeed.Content] = []
        for await message in subscription.messages { out.append(message.content) }
        return out
    }

    @Test(
        "10,000 transitions with 20 readers, one never reading: each gets at most its budget, then summaries, then one reset; nothing is queued without bound"
    )
    func stormIsCoalesced() async {
        let feed = LiveFeed(bufferLimit: 64, alertBudget: 200)
        let silent = feed.subscribe(lastEventId: nil)
        let readers = (0..<19).map { _ in feed.subscribe(lastEventId: nil) }
        let results = Task {
            await withTaskGroup(of: [LiveFeed.Content].self) { group in
                for reader in readers { group.addTask { await Self.collect(reader) } }
                return await group.reduce(into: []) { $0.append($1) }
            }
        }
        var counts = FleetCounts()
        // 10 ticks of 1,000 transitions in commits of 100, summaries after each tick; then two quiet ticks.
        for tick in 0..<12 {
            if tick < 10 {
                for commit in 0..<10 {
                    feed.publish((0..<100).map { alert("t\(tick)-\(commit)-\($0)", .syncError, .firing) })
                }
                counts.devices += 1_000
                counts.broken += 1_000
            }
            feed.tick()
            feed.publishSummaries([.all: counts])
            await Task.yield()
        }
        #expect(feed.subscriberCount == 20, "no reader was cut off: the silent one holds a few summaries, not the storm")
        feed.finishAll()
        let received = await results.value
        #expect(received.count == 19)
        for contents in received {
            let alerts = LiveFeedTests.alertIds(contents)
            #expect(alerts.count == 200, "the first tick's budget, then nothing more of the storm")
            let resets = contents.filter { if case .reset = $0 { true } else { false } }
            #expect(resets.count == 1, "one reset once the storm is over")
            let summaries = contents.compactMap { content -> [(scope: FleetScope, counts: FleetCounts)]? in
                if case .summaries(let scopes) = content { scopes } else { nil }
            }
            guard let last = summaries.last else {
                Issue.record("summaries kept coming during the storm")
                continue
            }
            #expect(summaries.count == 10, "one a tick while the counts changed")
            guard case .reset? = contents.last else {
                Issue.record("the reset comes last, once the storm is over")
                continue
            }
            #expect(last.first { $0.scope == .all }?.counts == counts, "the reader ends with the fleet's counts")
        }
        let held = await Self.collect(silent)
        #expect(held.count <= 64, "the reader that never reads holds at most its buffer (\(held.count) messages)")
    }

    @Test("below the budget every transition is sent; a replay longer than the budget is a reset")
    func calmAndLongReplay() async {
        let feed = LiveFeed(alertBudget: 50)
        let reader = feed.subscribe(lastEventId: nil)
        for tick in 0..<3 {
            feed.publish((0..<40).map { alert("c\(tick)-\($0)", .syncError, .firing) })
            feed.tick()
        }
        let calm = await LiveFeedTests.drain(reader, count: 120)
        #expect(LiveFeedTests.alertIds(calm).count == 120)
        #expect(!calm.contains { if case .reset = $0 { true } else { false } })
        let late = feed.subscribe(lastEventId: "e-0")
        guard case .reset? = await LiveFeedTests.drain(late, count: 1).first else {
            Issue.record("120 transitions to replay, more than the budget of 50: reset")
            return
        }
    }
}
