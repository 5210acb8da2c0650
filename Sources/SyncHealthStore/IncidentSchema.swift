/// How both databases store incidents (`SQLiteStore` migrations v11, v14 and v19, PostgreSQL's v8, v12 and v16): the columns a read selects,
/// in the order `IncidentRecord.init(row…)` takes them.
public enum IncidentSchema {
    /// The selected columns.
    public static let select = """
        seq, id, app_id, container_id, kind, error_domain, error_code, state, opened_at, resolved_at, devices, peak_devices,
        by_version, samples, notified_at, notified_devices, messages, revision, flapping_since, quiet_since, history, attested_only
        """
}
