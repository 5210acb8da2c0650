import Foundation
import SyncHealthClient

// The child of Client/scripts/kill-test: an app that reports through `SyncHealth.start` and is killed at any moment.
//
//   ClientKillTest record URL KEY DIRECTORY FIRST   records `pending(count: FIRST + i)` at random moments for ever,
//                                                    printing "R <count>" once each `record` has returned
//   ClientKillTest deliver URL KEY DIRECTORY        sends what the directory holds, then exits 0

let arguments = CommandLine.arguments
guard arguments.count >= 5, let endpoint = URL(string: arguments[2]) else {
    FileHandle.standardError.write(Data("usage: ClientKillTest record|deliver URL KEY DIRECTORY [FIRST]\n".utf8))
    exit(2)
}
var configuration = SyncHealthReporter.Configuration(
    endpoint: endpoint,
    ingestKey: arguments[3],
    appId: "com.example.killtest",
    containerId: "iCloud.com.example.killtest",
    deviceId: "kill-test-device",
    storageDirectory: URL(fileURLWithPath: arguments[4], isDirectory: true)
)
configuration.heartbeatOnStart = false
configuration.observesNetworkAndAccount = false
configuration.sendInterval = .milliseconds(100)
configuration.minimumRetryDelay = .milliseconds(50)
configuration.maximumRetryDelay = .milliseconds(300)
configuration.appVersion = "1.0"
configuration.log = { _ in }
let reporter = SyncHealth.start(configuration: configuration)

/// One line on standard output, written before the next event is recorded (no buffering).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

switch arguments[1] {
case "record":
    let first = Int(arguments.count > 5 ? arguments[5] : "0") ?? 0
    var random = SystemRandomNumberGenerator()
    var i = 0
    while true {
        reporter.record(.pending(count: first + i))
        say("R \(first + i)")
        i += 1
        // Bursts and pauses: sometimes several at once, sometimes across a send.
        if Int.random(in: 0..<4, using: &random) == 0 {
            usleep(UInt32.random(in: 1_000...60_000, using: &random))
        }
    }
case "deliver":
    let deadline = ContinuousClock.now + .seconds(60)
    while ContinuousClock.now < deadline {
        do {
            try await reporter.flush()
            if reporter.delivery.queuedEvents == 0 {
                await reporter.shutdown()
                say("delivered")
                exit(0)
            }
        } catch {
            try? await Task.sleep(for: .milliseconds(100))
        }
    }
    FileHandle.standardError.write(Data("deliver: the queue did not empty in 60 s: \(reporter.delivery)\n".utf8))
    exit(1)
default:
    exit(2)
}
