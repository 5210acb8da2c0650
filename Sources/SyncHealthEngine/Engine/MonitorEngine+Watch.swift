import Logging
import ServiceLifecycle
import SyncHealthCore

extension EngineReads {
    /// Runs `step` until graceful shutdown, as the watches that read the store on a schedule do: every second until
    /// the engine is ready, then every `interval`, or sooner when `step` returns an earlier time. A step that throws
    /// is logged with `failure` and tried again after `interval`.
    func watch(
        every interval: Duration,
        logger: Logger,
        failure: Logger.Message,
        _ step: @escaping @Sendable () async throws -> Timestamp?
    ) async {
        let wake = WakeSignal()
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                var next = now + (isReady ? interval : .seconds(1))
                if isReady {
                    do {
                        if let due = try await step() { next = min(next, max(due, now)) }
                    } catch {
                        logger.warning(failure, metadata: ["error": "\(error)"])
                    }
                }
                await wake.wait(until: next, clock: clock)
            }
        }
    }
}
