/// The `releaseRegression` rule: a release whose active devices are broken significantly more often than on the
/// app's previous release.
///
/// The test is one-sided, on two proportions with a pooled variance: `z = (p₁ − p₀) / √(p̂(1 − p̂)(1/n₁ + 1/n₀))`,
/// where `p₁` and `p₀` are the broken shares of the active devices on the release and on the previous one. It holds
/// when `z` is above the 0.999 quantile of the normal distribution (p < 0.001), the share is at least twice the
/// previous one, and the release has at least `minimumDevices` active devices.
public enum ReleaseRegression {
    /// The normal distribution's 0.999 quantile: `z` above it is p < 0.001, one-sided.
    public static let criticalZ = 3.090_232

    /// Why a release counts as a regression.
    public struct Finding: Hashable, Sendable {
        /// The release it is compared with.
        public var previous: String
        /// Its broken share of active devices.
        public var share: Double
        /// The previous release's.
        public var previousShare: Double
        /// The test statistic.
        public var z: Double
    }

    /// The regressions among one app's releases, by release.
    ///
    /// The previous release of `v` is the greatest release below it (in `ReleaseOrder`) with an active device;
    /// releases the devices did not name (`""`) are neither judged nor compared with.
    public static func evaluate(_ releases: [String: ReleaseCounts], minimumDevices: Int) -> [String: Finding] {
        let ordered = ReleaseOrder.sorted(releases.lazy.filter { !$0.key.isEmpty && $0.value.counts.active > 0 }.map(\.key))
        var findings: [String: Finding] = [:]
        for (previous, release) in zip(ordered, ordered.dropFirst()) {
            guard let counts = releases[release]?.counts, counts.active >= max(1, minimumDevices), let base = releases[previous]?.counts else {
                continue
            }
            if let finding = compare(counts, with: base, previous: previous) { findings[release] = finding }
        }
        return findings
    }

    /// The finding if `counts` is a regression from `base`, else `nil`.
    static func compare(_ counts: FleetCounts, with base: FleetCounts, previous: String) -> Finding? {
        let (n1, n0) = (Double(counts.active), Double(base.active))
        let (b1, b0) = (Double(counts.activeBroken), Double(base.activeBroken))
        guard n1 > 0, n0 > 0 else { return nil }
        let (p1, p0) = (b1 / n1, b0 / n0)
        let pooled = (b1 + b0) / (n1 + n0)
        let variance = pooled * (1 - pooled) * (1 / n1 + 1 / n0)
        guard variance > 0, p1 >= 2 * p0 else { return nil }
        let z = (p1 - p0) / variance.squareRoot()
        guard z > criticalZ else { return nil }
        return Finding(previous: previous, share: p1, previousShare: p0, z: z)
    }
}

/// How releases sort: by their dot-separated parts, numbers as numbers (`1.10` after `1.9`), other parts as text,
/// and a pre-release before its release (`2.0-beta` before `2.0`).
public enum ReleaseOrder {
    /// Whether `a` comes before `b`.
    public static func less(_ a: String, _ b: String) -> Bool {
        less(Key(a), Key(b))
    }

    /// `versions` in order, each split into its parts once.
    public static func sorted(_ versions: some Sequence<String>) -> [String] {
        versions.map(Key.init).sorted(by: less).map(\.version)
    }

    /// A version with its parts.
    struct Key {
        var version: String
        var parts: [Substring]

        init(_ version: String) {
            self.version = version
            parts = version.split(whereSeparator: { $0 == "." || $0 == "-" || $0 == " " || $0 == "(" || $0 == ")" })
        }
    }

    static func less(_ a: Key, _ b: Key) -> Bool {
        let (pa, pb) = (a.parts, b.parts)
        for (x, y) in zip(pa, pb) where x != y {
            switch (Int(x), Int(y)) {
            case (let i?, let j?): return i < j
            case (.some, nil): return false
            case (nil, .some): return true
            case (nil, nil): return x < y
            }
        }
        guard pa.count != pb.count else { return a.version < b.version }
        // One is the other with more parts: a number makes it later (`1.9.1`), text earlier (`2.0-beta`).
        return pa.count < pb.count ? Int(pb[pa.count]) != nil : Int(pa[pb.count]) == nil
    }
}

/// One release of one app: the subject of a `releaseRegression` alert.
public struct ReleaseKey: Hashable, Sendable, Comparable {
    /// The app.
    public var appId: String
    /// Its version.
    public var version: String

    /// Creates a key.
    public init(appId: String, version: String) {
        self.appId = appId
        self.version = version
    }

    public static func < (a: ReleaseKey, b: ReleaseKey) -> Bool {
        a.appId != b.appId ? a.appId < b.appId : ReleaseOrder.less(a.version, b.version)
    }
}

extension ReleaseRegression {
    /// A change of one release's `releaseRegression` alert.
    public struct Change: Hashable, Sendable {
        /// The release.
        public var key: ReleaseKey
        /// Its fire or resolve.
        public var transition: AlertTransition
        /// Why it fires; `nil` for a resolve.
        public var finding: Finding?
    }

    /// The regression alerts that change at `now`, in key order: a release found to be a regression without a
    /// firing alert fires, and a firing alert whose release no longer is one resolves.
    ///
    /// - Parameters:
    ///   - firing: the releases whose alert fires, with when it started.
    ///   - findings: the releases that are regressions now (`evaluate`).
    public static func changes(firing: [ReleaseKey: Timestamp], findings: [ReleaseKey: Finding], now: Timestamp) -> [Change] {
        var changes: [Change] = []
        for (key, finding) in findings where firing[key] == nil {
            changes.append(Change(key: key, transition: AlertTransition(kind: .releaseRegression, change: .fire, startsAt: now), finding: finding))
        }
        for (key, startsAt) in firing where findings[key] == nil {
            changes.append(
                Change(
                    key: key,
                    transition: AlertTransition(kind: .releaseRegression, change: .resolve, startsAt: startsAt, endsAt: now),
                    finding: nil
                )
            )
        }
        return changes.sorted { $0.key < $1.key }
    }
}
