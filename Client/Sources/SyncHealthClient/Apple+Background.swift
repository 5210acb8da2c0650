// The upload on going to the background. Type-checked on Linux against declaration stubs (`Client/AppleStubs`,
// `Client/scripts/check-apple-glue`).
#if canImport(UIKit)
import Foundation
import UIKit

extension SyncHealthReporter {
    /// Sends the queue when the app goes to the background (or, in an app extension, its host does).
    func observeBackground() {
        var names = [Notification.Name.NSExtensionHostDidEnterBackground]
        #if !os(watchOS)
        names.append(UIApplication.didEnterBackgroundNotification)
        #endif
        for name in names {
            let token = NotificationCenter.default.addObserver(forName: name, object: nil, queue: nil) { [weak self] _ in
                self?.flushBeforeSuspension()
            }
            let box = Unchecked(value: token)
            addStop { NotificationCenter.default.removeObserver(box.value) }
        }
    }

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
}
#endif
