import SyncHealthCore
import SyncHealthTestSupport
import Testing

@testable import SyncHealthStore

@Suite("Store conformance: subscriptions, outbox and delivery log")
struct WebhookStoreConformanceTests {
    @Test("subscriptions are saved, replaced, listed and deleted with their outbox and log", arguments: StoreKind.allCases)
    func subscriptions(kind: StoreKind) async throws {
        try await kind.withStore { store in
            try await store.saveWebhook(subscription("wh_1"))
            try await store.saveWebhook(subscription("wh_2"))
            var disabled = subscription("wh_1")
            disabled.disabledReason = "gone"
            try await store.saveWebhook(disabled)
            let all = try await store.webhooks()
            #expect(all.map(\.id) == ["wh_1", "wh_2"])
            #expect(all[0].disabledReason == "gone")
            #expect(all[1] == subscription("wh_2"))

            var changes = StoreChanges(recordedAt: t0)
            changes.outbox = [message("m1", webhook: "wh_1"), message("m2", webhook: "wh_2")]
            try await store.commit(changes)
            #expect(try await store.deleteWebhook(id: "wh_1"))
            #expect(try await store.deleteWebhook(id: "wh_1") == false)
            #expect(try await store.dueMessages(now: t0, limit: 10).map(\.id) == ["m2"])
        }
    }

    @Test("a subscription's format and routing lists are saved and read back, and replaced with it", arguments: StoreKind.allCases)
    func formatAndRouting(kind: StoreKind) async throws {
        try await kind.withStore { store in
            var routed = subscription("wh_pd")
            routed.format = .pagerduty
            routed.routingKey = "R0UTING"
            routed.appIds = ["com.a", "com.b"]
            routed.containerIds = ["iCloud.a"]
            routed.errorClasses = [.dataLoss, .developer]
            try await store.saveWebhook(routed)
            var manager = subscription("wh_am")
            manager.format = .alertmanager
            try await store.saveWebhook(manager)
            let all = Dictionary(uniqueKeysWithValues: try await store.webhooks().map { ($0.id, $0) })
            #expect(all["wh_pd"] == routed)
            #expect(all["wh_am"] == manager)
            routed.appIds = []
            routed.format = .slack
            try await store.saveWebhook(routed)
            #expect(try await store.webhooks().first { $0.id == "wh_pd" } == routed)
        }
    }

    @Test("a line's messages come one at a time, in order; retries wait for their time", arguments: StoreKind.allCases)
    func outboxOrder(kind: StoreKind) async throws {
        try await kind.withStore { store in
            try await store.saveWebhook(subscription())
            var changes = StoreChanges(recordedAt: t0)
            changes.outbox = [message("a1", line: "A"), message("b1", line: "B"), message("a2", line: "A", at: 1), message("a1", line: "A")]
            try await store.commit(changes)
            #expect(try await store.nextDueTime() == t0)
            let due = try await store.dueMessages(now: t0 + .seconds(5), limit: 10)
            #expect(due.map(\.id) == ["a1", "b1"], "one per line, the first; a repeated id is one message")

            try await store.recordAttempt(
                DeliveryAttempt(
                    webhookId: "wh_1",
                    messageId: "a1",
                    attempt: 1,
                    attemptedAt: t0 + .seconds(5),
                    statusCode: 500,
                    error: "500",
                    nextRetryAt: t0 + .seconds(60),
                    outcome: .retrying
                ),
                disable: nil
            )
            try await store.recordAttempt(
                DeliveryAttempt(
                    webhookId: "wh_1",
                    messageId: "b1",
                    attempt: 1,
                    attemptedAt: t0 + .seconds(5),
                    statusCode: 200,
                    error: nil,
                    nextRetryAt: nil,
                    outcome: .delivered
                ),
                disable: nil
            )
            #expect(try await store.dueMessages(now: t0 + .seconds(10), limit: 10).isEmpty, "a1 waits for its retry; a2 waits behind it")
            #expect(try await store.nextDueTime() == t0 + .seconds(1), "the earliest pending time, a2 behind its line included")
            let retry = try await store.dueMessages(now: t0 + .seconds(60), limit: 10)
            #expect(retry.map(\.id) == ["a1"])
            #expect(retry.first?.attempts == 1)
            try await store.recordAttempt(
                DeliveryAttempt(
                    webhookId: "wh_1",
                    messageId: "a1",
                    attempt: 2,
                    attemptedAt: t0 + .seconds(60),
                    statusCode: 200,
                    error: nil,
                    nextRetryAt: nil,
                    outcome: .delivered
                ),
                disable: nil
            )
            #expect(try await store.dueMessages(now: t0 + .seconds(60), limit: 10).map(\.id) == ["a2"])
        }
    }

    @Test("failed messages stay, block their line, and can be sent again; 410 disables; the log pages newest first", arguments: StoreKind.allCases)
    func failuresAndLog(kind: StoreKind) async throws {
        try await kind.withStore { store in
            try await store.saveWebhook(subscription())
            var changes = StoreChanges(recordedAt: t0)
            changes.outbox = [message("m1"), message("m2", at: 1)]
            try await store.commit(changes)
            _ = try await store.dueMessages(now: t0, limit: 10)
            try await store.recordAttempt(
                DeliveryAttempt(
                    webhookId: "wh_1",
                    messageId: "m1",
                    attempt: 8,
                    attemptedAt: t0,
                    statusCode: 410,
                    error: "gone",
                    nextRetryAt: nil,
                    outcome: .disabled
                ),
                disable: "410 Gone"
            )
            #expect(try await store.webhooks().first?.disabledReason == "410 Gone")
            #expect(try await store.dueMessages(now: t0 + .seconds(100), limit: 10).isEmpty, "a failed message holds its line")
            #expect(try await store.resend(webhookId: "wh_1", messageId: "m1", now: t0 + .seconds(100)))
            #expect(try await store.resend(webhookId: "wh_1", messageId: "m2", now: t0 + .seconds(100)) == false, "only failed ones")
            let again = try await store.dueMessages(now: t0 + .seconds(100), limit: 10)
            #expect(again.map(\.id) == ["m1"])
            #expect(again.first?.attempts == 0)

            for n in 2...5 {
                try await store.recordAttempt(
                    DeliveryAttempt(
                        webhookId: "wh_1",
                        messageId: "m1",
                        attempt: n,
                        attemptedAt: t0 + .seconds(Int64(n)),
                        statusCode: 503,
                        error: "503",
                        nextRetryAt: t0 + .seconds(1000),
                        outcome: .retrying
                    ),
                    disable: nil
                )
            }
            let first = try await store.deliveries(webhookId: "wh_1", limit: 3, before: nil)
            #expect(first.attempts.map(\.attempt) == [5, 4, 3])
            let cursor = try #require(first.nextCursor)
            let second = try await store.deliveries(webhookId: "wh_1", limit: 3, before: cursor)
            #expect(second.attempts.map(\.attempt) == [2, 8])
            #expect(second.nextCursor == nil)
            #expect(second.attempts.last?.statusCode == 410)
        }
    }
}

@Suite("Store conformance: silences")
struct SilenceStoreConformanceTests {
    static func silence(endsAt: Timestamp, released: Bool = false) -> Silence {
        Silence(id: "si_1", matchers: Silence.Matchers(appId: "com.a"), startsAt: t0, endsAt: endsAt, comment: "c", createdAt: t0, released: released)
    }

    @Test("a silence saved again keeps the earlier end and any release: a stale copy undoes neither", arguments: StoreKind.allCases)
    func staleCopyUndoesNothing(kind: StoreKind) async throws {
        try await kind.withStore { store in
            let planned = Self.silence(endsAt: t0 + .seconds(3600))
            try await store.saveSilence(planned)
            // Ended early by one replica, released by another that still held the planned end.
            try await store.saveSilence(Self.silence(endsAt: t0 + .seconds(60)))
            try await store.saveSilence(Self.silence(endsAt: t0 + .seconds(3600), released: true))
            #expect(try await store.silences() == [Self.silence(endsAt: t0 + .seconds(60), released: true)])
            // A copy read before the release does not take it back.
            try await store.saveSilence(Self.silence(endsAt: t0 + .seconds(60)))
            #expect(try await store.silences().first?.released == true)
        }
    }
}
