import Logging
import Prometheus
import ServiceLifecycle
import SyncHealthEngine
import SyncHealthEngineTesting
import SyncHealthTestSupport
import Synchronization
import Testing

@testable import SyncHealthServer

@Suite("Heap trimmer")
struct HeapTrimmerTests {
    #if canImport(Glibc)
    @Test("memory freed between blocks that stay allocated goes back to the system after a trim")
    func trimReturnsFreedHoles() throws {
        // 256 MiB in 512-byte blocks, one in 64 kept: no freed page is at the heap's end, where `free` trims.
        let size = 512
        let count = 1 << 19
        var blocks: [UnsafeMutableRawPointer] = []
        blocks.reserveCapacity(count)
        for _ in 0..<count {
            let block = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
            block.initializeMemory(as: UInt8.self, repeating: 1, count: size)
            blocks.append(block)
        }
        var kept: [UnsafeMutableRawPointer] = []
        for (i, block) in blocks.enumerated() {
            if i % 64 == 0 { kept.append(block) } else { block.deallocate() }
        }
        blocks = []
        let freed = try Self.residentBytes()
        #expect(HeapTrimmer.trimNow())
        let trimmed = try Self.residentBytes()
        #expect(freed - trimmed >= 128 << 20, "RSS \(freed >> 20) MiB before the trim, \(trimmed >> 20) MiB after")
        for block in kept { block.deallocate() }
    }

    /// This process's resident set, as the trimmer reads it.
    static func residentBytes() throws -> Int {
        try #require(HeapTrimmer.readNow()).resident
    }
    #endif

    @Test("the trimmer trims when its policy says so, and graceful shutdown stops it during its sleep")
    func trimsWhenQuietAndStops() async throws {
        let calls = Mutex(0)
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        // Quiet, and 32 MiB more resident at every reading: each reading after the first asks for a trim.
        let readings = Mutex(0)
        let often = HeapTrimmer(
            interval: .milliseconds(20),
            logger: logger,
            read: {
                let count = readings.withLock { count in
                    count += 1
                    return count
                }
                return HeapTrimPolicy.Reading(at: .now, cpu: .zero, resident: count << 25)
            },
            trim: {
                calls.withLock { $0 += 1 }
                return false
            }
        )
        // Asleep for an hour: the group ends only if graceful shutdown wakes it.
        let rarely = HeapTrimmer(
            interval: .seconds(3600),
            logger: logger,
            read: { HeapTrimPolicy.Reading(at: .now, cpu: .zero, resident: 1 << 40) },
            trim: {
                Issue.record("trimmed before its interval")
                return false
            }
        )
        let group = ServiceGroup(configuration: .init(services: [often, rarely], logger: logger))
        let stopped = try await withThrowingTaskGroup(of: Bool.self) { tasks in
            tasks.addTask {
                try await group.run()
                return true
            }
            tasks.addTask {
                try await Task.sleep(for: .seconds(30))
                return false
            }
            #expect(try await eventually(tries: 250, every: .milliseconds(20)) { calls.withLock { $0 } >= 3 })
            await group.triggerGracefulShutdown()
            let first = try await tasks.next() ?? false
            tasks.cancelAll()
            return first
        }
        #expect(stopped, "the group stopped before the 30 s guard")
        let after = calls.withLock { $0 }
        try await Task.sleep(for: .milliseconds(100))
        #expect(calls.withLock { $0 } == after, "no trim after the trimmer stopped")
    }

    @Test("a process busy on every core is not trimmed, however much its resident set grows")
    func busyIsNotTrimmed() async throws {
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let start = ContinuousClock.now
        let readings = Mutex(0)
        let trimmer = HeapTrimmer(
            interval: .milliseconds(10),
            policy: HeapTrimPolicy(busyInterval: .seconds(3600)),
            logger: logger,
            read: {
                let count = readings.withLock { count in
                    count += 1
                    return count
                }
                // Two cores' worth of CPU time since the start.
                let now = ContinuousClock.now
                return HeapTrimPolicy.Reading(at: now, cpu: (now - start) * 2, resident: count << 25)
            },
            trim: {
                Issue.record("trimmed under load")
                return false
            }
        )
        let group = ServiceGroup(configuration: .init(services: [trimmer], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            #expect(try await eventually { readings.withLock { $0 } >= 20 })
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }

    @Test("the heap is measured into the gauges after a trim at rest, and not after a trim under load")
    func measuresOnlyAtRest() async throws {
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let registry = PrometheusCollectorRegistry()
        let readings = Mutex(0)
        let measured = Mutex<[Int]>([])
        // Readings 1-4 busy (two cores' worth a reading), then quiet; 32 MiB more resident at each. Reading 1 is
        // the baseline, 2 trims under load (no busy interval), 3 and 4 stay busy, 5 trims at rest.
        let trimmer = HeapTrimmer(
            interval: .milliseconds(10),
            policy: HeapTrimPolicy(busyInterval: .zero),
            logger: logger,
            metrics: PrometheusMetricsFactory(registry: registry),
            read: {
                let count = readings.withLock { count in
                    count += 1
                    return count
                }
                let busy = Duration.seconds(min(count, 4) * 100)
                return HeapTrimPolicy.Reading(at: .now, cpu: busy, resident: count << 25)
            },
            trim: { true },
            measure: {
                let count = readings.withLock { $0 }
                measured.withLock { $0.append(count) }
                return HeapUsage(inUse: 100 << 20 + count, free: 40 << 20)
            }
        )
        let group = ServiceGroup(configuration: .init(services: [trimmer], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            _ = try await eventually { !measured.withLock { $0.isEmpty } }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        let at = try #require(measured.withLock { $0.first })
        #expect(at >= 5, "measured after reading \(at), while the process was busy")
        // A slow machine may trim at rest again before the shutdown: the gauges hold the last measurement.
        let last = try #require(measured.withLock { $0.last })
        var text: [UInt8] = []
        registry.emit(into: &text)
        let metrics = String(decoding: text, as: UTF8.self)
        #expect(metrics.contains("synchealth_heap_in_use_bytes \(100 << 20 + last)"), "\(metrics)")
        #expect(metrics.contains("synchealth_heap_free_bytes \(40 << 20)"), "\(metrics)")
    }

    @Test("the heap's own measurement is there with glibc and counts what is allocated")
    func measuresTheProcess() throws {
        #if canImport(Glibc)
        let before = try #require(HeapTrimmer.measureNow())
        let block = UnsafeMutableRawPointer.allocate(byteCount: 64 << 20, alignment: 16)
        block.initializeMemory(as: UInt8.self, repeating: 1, count: 64 << 20)
        let during = try #require(HeapTrimmer.measureNow())
        block.deallocate()
        // Other threads of the test process allocate and free meanwhile: a mebibyte of slack.
        #expect(during.inUse - before.inUse >= (64 << 20) - (1 << 20))
        #expect(before.free >= 0)
        #endif
    }

    @Test("the process's own readings are there on Linux and move as it works")
    func readsTheProcess() throws {
        #if os(Linux)
        let first = try #require(HeapTrimmer.readNow())
        var sum = 0
        for i in 0..<5_000_000 { sum &+= i &* i }
        let second = try #require(HeapTrimmer.readNow())
        #expect(sum != 0)
        #expect(first.resident > 1 << 20)
        #expect(second.cpu > first.cpu)
        #expect(second.at > first.at)
        #endif
    }
}
