import PostgresNIO
public import SyncHealthCore
public import SyncHealthStore

extension PostgresStore {
    public func recordHistory(_ points: [HistoryPoint], resolution: HistoryResolution) async throws {
        guard !points.isEmpty else { return }
        // One statement for the whole sample: the points as arrays, unnested.
        try await run(
            """
            INSERT INTO fleet_history (resolution, at, app_id, container_id, counts)
            SELECT \(resolution.rawValue), * FROM unnest(\(points.map(\.at.microseconds))::bigint[], \(points.map { $0.scope.appId ?? "" })::text[],
                \(points.map { $0.scope.containerId ?? "" })::text[], \(points.map(\.counts.encodedFields))::text[])
            ON CONFLICT DO NOTHING
            """,
            logger: logger
        )
    }

    public func history(_ scope: FleetScope, resolution: HistoryResolution, from: Timestamp, to: Timestamp) async throws -> [HistoryPoint] {
        var points: [HistoryPoint] = []
        let rows = try await run(
            """
            SELECT at, counts FROM fleet_history
            WHERE resolution = \(resolution.rawValue) AND app_id = \(scope.appId ?? "") AND container_id = \(scope.containerId ?? "")
              AND at >= \(from.microseconds) AND at <= \(to.microseconds)
            ORDER BY at
            """,
            logger: logger
        )
        for try await (at, counts) in rows.decode((Int64, String).self) {
            points.append(HistoryPoint(at: Timestamp(microseconds: at), scope: scope, counts: FleetCounts(encodedFields: counts)))
        }
        return points
    }

    public func pruneHistory(_ resolution: HistoryResolution, before cutoff: Timestamp) async throws {
        try await run(
            "DELETE FROM fleet_history WHERE resolution = \(resolution.rawValue) AND at < \(cutoff.microseconds)",
            logger: logger
        )
    }
}
