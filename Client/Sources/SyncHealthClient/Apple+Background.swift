// The upload on going to the background, and on quitting a Mac app. Type-checked on Linux against declaration
// stubs (`Client/AppleStubs`, `Client/scripts/check-apple-glue`); the watchOS and macOS names are plain strings.
#if canImport(UIKit) || os(macOS)
import Foundation
#if canImport(UIKit)
import UIKit
#endif

extension SyncHealthReporter {
    /// Sends the queue when the app goes to the background (or, in an app extension, its host does; on watchOS,
    /// the watch app does), and when a Mac app quits.
    ///
    /// What is recorded is on disk already (`record`), so these only send it sooner. A silent-push launch never goes
    /// to the background: the app's handler should `try? await SyncHealth.shared?.flush(within: .seconds(20))`
    /// before it calls its completion handler (Client/README.md).
    func observeBackground() {
        #if os(macOS)
        // `NSApplication.willTerminateNotification` is main-actor isolated in Swift 6's SDK; its value is the
        // constant's name. Quitting waits for the send 2 s at most. (Neither `NSExtensionHostDidEnterBackground` nor
        // `performExpiringActivity` exists on macOS: a Mac app is not suspended the iOS way. Mac Catalyst is not
        // `os(macOS)`, and takes the other branch.)
        let quit = NotificationCenter.default.addObserver(
            forName: Notification.Name("NSApplicationWillTerminateNotification"),
            object: nil,
            queue: nil
        ) { [weak self] _ in
            self?.flushBeforeExit(waitingAtMost: .seconds(2))
        }
        let quitBox = Unchecked(value: quit)
        addStop { NotificationCenter.default.removeObserver(quitBox.value) }
        #else
        var names = [Notification.Name.NSExtensionHostDidEnterBackground]
        #if canImport(UIKit) && !os(watchOS)
        names.append(UIApplication.didEnterBackgroundNotification)
        #endif
        #if os(watchOS)
        // `WKApplication.didEnterBackgroundNotification` is main-actor isolated in Swift 6's SDK; its value is the
        // constant's name.
        names.append(Notification.Name("WKApplicationDidEnterBackgroundNotification"))
        #endif
        for name in names {
            let token = NotificationCenter.default.addObserver(forName: name, object: nil, queue: nil) { [weak self] _ in
                self?.flushBeforeSuspension()
            }
            let box = Unchecked(value: token)
            addStop { NotificationCenter.default.removeObserver(box.value) }
        }
        #endif
    }

    #if !os(macOS)
    /// Flushes inside an expiring activity, so that suspension does not cut the upload short.
    /// `ProcessInfo.performExpiringActivity` works in apps and app extensions alike (`UIApplication.shared` is
    /// unavailable in extensions), and needs nothing ended by hand: the activity lasts while the block runs.
    /// The block waits for the flush; when the system is about to suspend, it calls the block again with
    /// `expired`, which cancels the flush (its events stay queued) and lets the first call return at once.
    func flushBeforeSuspension() {
        let reporter = self
        let flush = Locked<Task<Void, Never>?>(nil)
        let finished = DispatchSemaphore(value: 0)
        ProcessInfo.processInfo.performExpiringActivity(withReason: "SyncHealth upload") { expired in
            if expired {
                flush.withLock { $0?.cancel() }
                finished.signal()
                return
            }
            let task = Task.detached(priority: .utility) {
                try? await reporter.flush()
                finished.signal()
            }
            flush.withLock { $0 = task }
            finished.wait()
        }
    }

    #endif

    /// Sends what is queued before the process exits, waiting at most `limit` (the caller is the main thread of an
    /// app that is quitting); what is not sent by then stays on disk for the next launch.
    func flushBeforeExit(waitingAtMost limit: Duration) {
        let reporter = self
        let finished = DispatchSemaphore(value: 0)
        let task = Task.detached(priority: .userInitiated) {
            try? await reporter.flush()
            finished.signal()
        }
        let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
        if finished.wait(timeout: .now() + seconds) == .timedOut { task.cancel() }
    }
}
#endif
