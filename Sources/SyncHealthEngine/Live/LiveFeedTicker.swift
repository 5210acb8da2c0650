public import Logging
public import ServiceLifecycle
import SyncHealthCore

/// Drives the engine's `LiveFeed` while anyone listens: once a second, a tick (which renews each reader's budget of
/// transitions, and resets the readers a storm coalesced once it is over) and the summaries of the scopes that
/// changed (at most `maxScopes`, the largest); every `keepaliveInterval`, a keepalive. At graceful shutdown it ends every
/// subscription, so that open streams end and the HTTP server can drain.
public struct LiveFeedTicker: Service {
    let engine: any EngineReads
    let maxScopes: Int
    let keepaliveInterval: Duration
    let logger: Logger

    /// Ticks `engine.feed`.
    public init(engine: any EngineReads, maxScopes: Int = 1_000, keepaliveInterval: Duration = .seconds(15), logger: Logger) {
        self.engine = engine
        self.maxScopes = maxScopes
        self.keepaliveInterval = keepaliveInterval
        self.logger = logger
    }

    public func run() async throws {
        await withGracefulShutdownHandler {
            await cancelWhenGracefulShutdown {
                var lastKeepalive = engine.now
                while !Task.isCancelled {
                    do { try await engine.clock.sleep(until: engine.now + .seconds(1)) } catch { return }
                    engine.feed.tick()
                    await publishSummaries()
                    if engine.now - lastKeepalive >= keepaliveInterval {
                        engine.feed.keepalive()
                        lastKeepalive = engine.now
                    }
                }
            }
        } onGracefulShutdown: {
            engine.feed.finishAll()
        }
    }

    /// Publishes the summaries that changed, when there is a subscriber and the engine serves reads.
    public func publishSummaries() async {
        guard engine.feed.subscriberCount > 0, engine.isReady else { return }
        do {
            let scopes = FleetScopeSelection.largest(try await engine.summaries(), limit: maxScopes)
            engine.feed.publishSummaries(Dictionary(uniqueKeysWithValues: scopes.map { ($0.scope, $0.counts) }))
        } catch {
            logger.debug("Reading summaries for the live feed failed", metadata: ["error": "\(error)"])
        }
    }
}
