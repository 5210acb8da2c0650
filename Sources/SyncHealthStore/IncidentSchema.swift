/// How both databases store incidents (`SQLiteStore` migrations v11 and v14, PostgreSQL's v8 and v12): the columns a read selects,
/// in the order `IncidentRecord.init(row…)` takes them.
public enum IncidentSchema {
    /// The selected columns.
    public static let select = """
        seq, id, app_id, container_id, kind, error_domain, error_code, state, opened_at, resolved_at, devices, peak_devices,
        by_version, samples, notified_at, notified_devices, messages, revision, flapping_since, quiet_since, history
        """
}
