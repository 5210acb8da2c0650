/// The write function as migrations v5, v6 and v9 shipped it. Each was replaced by a later migration, and each still
/// runs, in order, when a new database is migrated: shipped text, never edited.
extension PostgresGroupSQL {
    /// Writes a group, all or nothing, if no other writer changed what it planned on; otherwise raises
    /// `40001` (serialization failure) and writes nothing.
    ///
    /// - Devices: written only where the stored version is the one read (0: not stored), each at version + 1;
    ///   `guarded` false writes them whatever their version (no caller since the store lost its direct write).
    /// - Fleet alerts: a fire inserts where none fires; an end deletes the alert that was read (`f_expected`).
    /// - Counters: deltas added to this replica's shard, which no other replica writes.
    /// Strings stand for NULL as `''` and numbers as `-1`, since postgres-nio binds no NULL inside an array.
    static let writeFunction = """
        CREATE FUNCTION synchealth_write_group(
            d_app text[], d_dev text[], d_hash bigint[], d_state bytea[], d_container text[], d_summary text[],
            d_broken boolean[], d_due bigint[], d_version bigint[], counted bigint, guarded boolean,
            e_hash bigint[], e_id text[],
            a_id text[], a_kind text[], a_state text[], a_app text[], a_dev text[], a_container text[],
            a_starts bigint[], a_ends bigint[], a_summary text[], a_detail text[],
            f_container text[], f_starts bigint[], f_expected bigint[],
            o_id text[], o_webhook text[], o_key text[], o_payload text[], o_created bigint[], o_attempts integer[],
            o_next bigint[], o_state text[],
            c_shard bigint, c_app text[], c_container text[], c_field text[], c_delta bigint[])
        RETURNS integer
        LANGUAGE plpgsql AS $$
        DECLARE
            n integer;
        BEGIN
            INSERT INTO devices AS cur (app_id, device_id, key_hash, state, container_id, summary, broken, due_at, counted_at, version)
            SELECT t.a, t.d, t.h, t.s, NULLIF(t.c, ''), t.su, t.b, NULLIF(t.du, -1), counted, t.v + 1
            FROM unnest(d_app, d_dev, d_hash, d_state, d_container, d_summary, d_broken, d_due, d_version) AS t(a, d, h, s, c, su, b, du, v)
            ON CONFLICT (app_id, device_id) DO UPDATE SET state = excluded.state, container_id = excluded.container_id,
                summary = excluded.summary, broken = excluded.broken, due_at = excluded.due_at,
                counted_at = excluded.counted_at, version = cur.version + 1
            WHERE NOT guarded OR cur.version = excluded.version - 1;
            GET DIAGNOSTICS n = ROW_COUNT;
            IF n <> coalesce(cardinality(d_app), 0) THEN
                RAISE EXCEPTION 'synchealth: a device changed since it was read' USING ERRCODE = '40001';
            END IF;

            FOR i IN 1..coalesce(cardinality(f_container), 0) LOOP
                IF f_starts[i] < 0 THEN
                    DELETE FROM fleet_alerts WHERE container_id = f_container[i] AND (NOT guarded OR starts_at = f_expected[i]);
                ELSIF guarded THEN
                    INSERT INTO fleet_alerts (container_id, starts_at) VALUES (f_container[i], f_starts[i]) ON CONFLICT DO NOTHING;
                ELSE
                    INSERT INTO fleet_alerts (container_id, starts_at) VALUES (f_container[i], f_starts[i])
                    ON CONFLICT (container_id) DO UPDATE SET starts_at = excluded.starts_at;
                END IF;
                GET DIAGNOSTICS n = ROW_COUNT;
                IF guarded AND n <> 1 THEN
                    RAISE EXCEPTION 'synchealth: a fleet alert changed since it was read' USING ERRCODE = '40001';
                END IF;
            END LOOP;

            INSERT INTO seen_events (device_hash, event_id, recorded_at)
            SELECT t.h, t.e, counted FROM unnest(e_hash, e_id) AS t(h, e)
            ON CONFLICT DO NOTHING;

            INSERT INTO alerts (id, kind, state, app_id, device_id, container_id, starts_at, ends_at, summary, detail)
            SELECT t.i, t.k, t.s, NULLIF(t.ap, ''), NULLIF(t.dv, ''), NULLIF(t.c, ''), t.st, NULLIF(t.en, -1), t.su, t.de
            FROM unnest(a_id, a_kind, a_state, a_app, a_dev, a_container, a_starts, a_ends, a_summary, a_detail)
                AS t(i, k, s, ap, dv, c, st, en, su, de)
            ON CONFLICT (id) DO UPDATE SET state = excluded.state, ends_at = excluded.ends_at,
                summary = excluded.summary, detail = excluded.detail;

            INSERT INTO outbox (id, webhook_id, ordering_key, payload, created_at, attempts, next_attempt_at, state)
            SELECT * FROM unnest(o_id, o_webhook, o_key, o_payload, o_created, o_attempts, o_next, o_state)
            ON CONFLICT (id) DO NOTHING;

            INSERT INTO fleet_counters (shard, app_id, container_id, field, n)
            SELECT c_shard, t.a, t.c, t.f, t.n FROM unnest(c_app, c_container, c_field, c_delta) AS t(a, c, f, n)
            ON CONFLICT (shard, app_id, container_id, field) DO UPDATE SET n = fleet_counters.n + excluded.n;
            RETURN 0;
        END
        $$
        """

    /// Migration v6: `writeFunction`, with three changes.
    /// - A guarded write is also refused when one of its event ids is recorded already, so that a group may plan
    ///   without reading them (every id as new) and a duplicate sent to two replicas at once is applied once.
    /// - A device's deadline (`due_at`) is written as planned only for the devices whose timers the group claimed
    ///   (`d_exact`); any other keeps its stored deadline unless the planned one is earlier. Its timers may then
    ///   wake early, which evaluates them (a pure function of state and time) and writes the exact deadline. In
    ///   exchange most writes leave every indexed column as it was, and PostgreSQL updates the row in place (a
    ///   HOT update, room for which `devices`' fillfactor keeps).
    /// - Alerts and webhook messages are written only when there are some.
    static let dropWriteFunctionV5 = """
        DROP FUNCTION synchealth_write_group(text[], text[], bigint[], bytea[], text[], text[], boolean[], bigint[], bigint[],
            bigint, boolean, bigint[], text[], text[], text[], text[], text[], text[], text[], bigint[], bigint[], text[], text[],
            text[], bigint[], bigint[], text[], text[], text[], text[], bigint[], integer[], bigint[], text[], bigint, text[],
            text[], text[], bigint[])
        """

    /// Migration v6's `synchealth_write_group` (see `dropWriteFunctionV5`).
    static let writeFunctionV6 = """
        CREATE FUNCTION synchealth_write_group(
            d_app text[], d_dev text[], d_hash bigint[], d_state bytea[], d_container text[], d_summary text[],
            d_broken boolean[], d_due bigint[], d_exact boolean[], d_version bigint[], counted bigint, guarded boolean,
            e_hash bigint[], e_id text[],
            a_id text[], a_kind text[], a_state text[], a_app text[], a_dev text[], a_container text[],
            a_starts bigint[], a_ends bigint[], a_summary text[], a_detail text[],
            f_container text[], f_starts bigint[], f_expected bigint[],
            o_id text[], o_webhook text[], o_key text[], o_payload text[], o_created bigint[], o_attempts integer[],
            o_next bigint[], o_state text[],
            c_shard bigint, c_app text[], c_container text[], c_field text[], c_delta bigint[])
        RETURNS integer
        LANGUAGE plpgsql AS $$
        DECLARE
            n integer;
            m integer := 0;
        BEGIN
            IF true = ANY(d_exact) THEN
                INSERT INTO devices AS cur (app_id, device_id, key_hash, state, container_id, summary, broken, due_at, counted_at, version)
                SELECT t.a, t.d, t.h, t.s, NULLIF(t.c, ''), t.su, t.b, NULLIF(t.du, -1), counted, t.v + 1
                FROM unnest(d_app, d_dev, d_hash, d_state, d_container, d_summary, d_broken, d_due, d_exact, d_version)
                    AS t(a, d, h, s, c, su, b, du, x, v)
                WHERE t.x
                ON CONFLICT (app_id, device_id) DO UPDATE SET state = excluded.state, container_id = excluded.container_id,
                    summary = excluded.summary, broken = excluded.broken, due_at = excluded.due_at,
                    counted_at = excluded.counted_at, version = cur.version + 1
                WHERE NOT guarded OR cur.version = excluded.version - 1;
                GET DIAGNOSTICS m = ROW_COUNT;
            END IF;
            INSERT INTO devices AS cur (app_id, device_id, key_hash, state, container_id, summary, broken, due_at, counted_at, version)
            SELECT t.a, t.d, t.h, t.s, NULLIF(t.c, ''), t.su, t.b, NULLIF(t.du, -1), counted, t.v + 1
            FROM unnest(d_app, d_dev, d_hash, d_state, d_container, d_summary, d_broken, d_due, d_exact, d_version)
                AS t(a, d, h, s, c, su, b, du, x, v)
            WHERE NOT t.x
            ON CONFLICT (app_id, device_id) DO UPDATE SET state = excluded.state, container_id = excluded.container_id,
                summary = excluded.summary, broken = excluded.broken, due_at = LEAST(cur.due_at, excluded.due_at),
                counted_at = excluded.counted_at, version = cur.version + 1
            WHERE NOT guarded OR cur.version = excluded.version - 1;
            GET DIAGNOSTICS n = ROW_COUNT;
            IF n + m <> coalesce(cardinality(d_app), 0) THEN
                RAISE EXCEPTION 'synchealth: a device changed since it was read' USING ERRCODE = '40001';
            END IF;

            FOR i IN 1..coalesce(cardinality(f_container), 0) LOOP
                IF f_starts[i] < 0 THEN
                    DELETE FROM fleet_alerts WHERE container_id = f_container[i] AND (NOT guarded OR starts_at = f_expected[i]);
                ELSIF guarded THEN
                    INSERT INTO fleet_alerts (container_id, starts_at) VALUES (f_container[i], f_starts[i]) ON CONFLICT DO NOTHING;
                ELSE
                    INSERT INTO fleet_alerts (container_id, starts_at) VALUES (f_container[i], f_starts[i])
                    ON CONFLICT (container_id) DO UPDATE SET starts_at = excluded.starts_at;
                END IF;
                GET DIAGNOSTICS n = ROW_COUNT;
                IF guarded AND n <> 1 THEN
                    RAISE EXCEPTION 'synchealth: a fleet alert changed since it was read' USING ERRCODE = '40001';
                END IF;
            END LOOP;

            INSERT INTO seen_events (device_hash, event_id, recorded_at)
            SELECT t.h, t.e, counted FROM unnest(e_hash, e_id) AS t(h, e)
            ON CONFLICT DO NOTHING;
            GET DIAGNOSTICS n = ROW_COUNT;
            IF guarded AND n <> coalesce(cardinality(e_id), 0) THEN
                RAISE EXCEPTION 'synchealth: an event id was recorded since it was read' USING ERRCODE = '40001';
            END IF;

            -- Most groups have no transition: a statement not run costs nothing.
            IF cardinality(a_id) > 0 THEN
                INSERT INTO alerts (id, kind, state, app_id, device_id, container_id, starts_at, ends_at, summary, detail)
                SELECT t.i, t.k, t.s, NULLIF(t.ap, ''), NULLIF(t.dv, ''), NULLIF(t.c, ''), t.st, NULLIF(t.en, -1), t.su, t.de
                FROM unnest(a_id, a_kind, a_state, a_app, a_dev, a_container, a_starts, a_ends, a_summary, a_detail)
                    AS t(i, k, s, ap, dv, c, st, en, su, de)
                ON CONFLICT (id) DO UPDATE SET state = excluded.state, ends_at = excluded.ends_at,
                    summary = excluded.summary, detail = excluded.detail;
            END IF;

            IF cardinality(o_id) > 0 THEN
                INSERT INTO outbox (id, webhook_id, ordering_key, payload, created_at, attempts, next_attempt_at, state)
                SELECT * FROM unnest(o_id, o_webhook, o_key, o_payload, o_created, o_attempts, o_next, o_state)
                ON CONFLICT (id) DO NOTHING;
            END IF;

            INSERT INTO fleet_counters (shard, app_id, container_id, field, n)
            SELECT c_shard, t.a, t.c, t.f, t.n FROM unnest(c_app, c_container, c_field, c_delta) AS t(a, c, f, n)
            ON CONFLICT (shard, app_id, container_id, field) DO UPDATE SET n = fleet_counters.n + excluded.n;
            RETURN 0;
        END
        $$
        """

    /// Migration v9's `synchealth_write_group`: v6's, with the alerts' `reason`, and device removals
    /// (`DeviceRemoval`), written last. A device planned on as stored (a version above 0) is not inserted when it
    /// is gone: another replica removed it, and this one's copy must not bring it back. A removal is guarded by the version read like a write; an erased
    /// device's alerts and queued messages (`r_keys`, their ordering keys) go with it. A new overload beside v6's,
    /// so that a replica of the release before keeps calling the one it knows during a rolling upgrade.
    static let writeFunctionV9 = """
        CREATE FUNCTION synchealth_write_group(
            d_app text[], d_dev text[], d_hash bigint[], d_state bytea[], d_container text[], d_summary text[],
            d_broken boolean[], d_due bigint[], d_exact boolean[], d_version bigint[], counted bigint, guarded boolean,
            e_hash bigint[], e_id text[],
            a_id text[], a_kind text[], a_state text[], a_app text[], a_dev text[], a_container text[],
            a_starts bigint[], a_ends bigint[], a_summary text[], a_detail text[],
            f_container text[], f_starts bigint[], f_expected bigint[],
            o_id text[], o_webhook text[], o_key text[], o_payload text[], o_created bigint[], o_attempts integer[],
            o_next bigint[], o_state text[],
            c_shard bigint, c_app text[], c_container text[], c_field text[], c_delta bigint[],
            a_reason text[], r_app text[], r_dev text[], r_version bigint[], r_erased boolean[], r_keys text[])
        RETURNS integer
        LANGUAGE plpgsql AS $$
        DECLARE
            n integer;
            m integer := 0;
        BEGIN
            IF true = ANY(d_exact) THEN
                INSERT INTO devices AS cur (app_id, device_id, key_hash, state, container_id, summary, broken, due_at, counted_at, version)
                SELECT t.a, t.d, t.h, t.s, NULLIF(t.c, ''), t.su, t.b, NULLIF(t.du, -1), counted, t.v + 1
                FROM unnest(d_app, d_dev, d_hash, d_state, d_container, d_summary, d_broken, d_due, d_exact, d_version)
                    AS t(a, d, h, s, c, su, b, du, x, v)
                WHERE t.x AND (NOT guarded OR t.v = 0 OR EXISTS (SELECT 1 FROM devices y WHERE y.app_id = t.a AND y.device_id = t.d))
                ON CONFLICT (app_id, device_id) DO UPDATE SET state = excluded.state, container_id = excluded.container_id,
                    summary = excluded.summary, broken = excluded.broken, due_at = excluded.due_at,
                    counted_at = excluded.counted_at, version = cur.version + 1
                WHERE NOT guarded OR cur.version = excluded.version - 1;
                GET DIAGNOSTICS m = ROW_COUNT;
            END IF;
            INSERT INTO devices AS cur (app_id, device_id, key_hash, state, container_id, summary, broken, due_at, counted_at, version)
            SELECT t.a, t.d, t.h, t.s, NULLIF(t.c, ''), t.su, t.b, NULLIF(t.du, -1), counted, t.v + 1
            FROM unnest(d_app, d_dev, d_hash, d_state, d_container, d_summary, d_broken, d_due, d_exact, d_version)
                AS t(a, d, h, s, c, su, b, du, x, v)
            WHERE NOT t.x AND (NOT guarded OR t.v = 0 OR EXISTS (SELECT 1 FROM devices y WHERE y.app_id = t.a AND y.device_id = t.d))
            ON CONFLICT (app_id, device_id) DO UPDATE SET state = excluded.state, container_id = excluded.container_id,
                summary = excluded.summary, broken = excluded.broken, due_at = LEAST(cur.due_at, excluded.due_at),
                counted_at = excluded.counted_at, version = cur.version + 1
            WHERE NOT guarded OR cur.version = excluded.version - 1;
            GET DIAGNOSTICS n = ROW_COUNT;
            IF n + m <> coalesce(cardinality(d_app), 0) THEN
                RAISE EXCEPTION 'synchealth: a device changed since it was read' USING ERRCODE = '40001';
            END IF;

            FOR i IN 1..coalesce(cardinality(f_container), 0) LOOP
                IF f_starts[i] < 0 THEN
                    DELETE FROM fleet_alerts WHERE container_id = f_container[i] AND (NOT guarded OR starts_at = f_expected[i]);
                ELSIF guarded THEN
                    INSERT INTO fleet_alerts (container_id, starts_at) VALUES (f_container[i], f_starts[i]) ON CONFLICT DO NOTHING;
                ELSE
                    INSERT INTO fleet_alerts (container_id, starts_at) VALUES (f_container[i], f_starts[i])
                    ON CONFLICT (container_id) DO UPDATE SET starts_at = excluded.starts_at;
                END IF;
                GET DIAGNOSTICS n = ROW_COUNT;
                IF guarded AND n <> 1 THEN
                    RAISE EXCEPTION 'synchealth: a fleet alert changed since it was read' USING ERRCODE = '40001';
                END IF;
            END LOOP;

            INSERT INTO seen_events (device_hash, event_id, recorded_at)
            SELECT t.h, t.e, counted FROM unnest(e_hash, e_id) AS t(h, e)
            ON CONFLICT DO NOTHING;
            GET DIAGNOSTICS n = ROW_COUNT;
            IF guarded AND n <> coalesce(cardinality(e_id), 0) THEN
                RAISE EXCEPTION 'synchealth: an event id was recorded since it was read' USING ERRCODE = '40001';
            END IF;

            -- Most groups have no transition: a statement not run costs nothing.
            IF cardinality(a_id) > 0 THEN
                INSERT INTO alerts (id, kind, state, app_id, device_id, container_id, starts_at, ends_at, summary, detail, reason)
                SELECT t.i, t.k, t.s, NULLIF(t.ap, ''), NULLIF(t.dv, ''), NULLIF(t.c, ''), t.st, NULLIF(t.en, -1), t.su, t.de,
                    NULLIF(t.r, '')
                FROM unnest(a_id, a_kind, a_state, a_app, a_dev, a_container, a_starts, a_ends, a_summary, a_detail, a_reason)
                    AS t(i, k, s, ap, dv, c, st, en, su, de, r)
                ON CONFLICT (id) DO UPDATE SET state = excluded.state, ends_at = excluded.ends_at,
                    summary = excluded.summary, detail = excluded.detail, reason = excluded.reason;
            END IF;

            IF cardinality(o_id) > 0 THEN
                INSERT INTO outbox (id, webhook_id, ordering_key, payload, created_at, attempts, next_attempt_at, state)
                SELECT * FROM unnest(o_id, o_webhook, o_key, o_payload, o_created, o_attempts, o_next, o_state)
                ON CONFLICT (id) DO NOTHING;
            END IF;

            INSERT INTO fleet_counters (shard, app_id, container_id, field, n)
            SELECT c_shard, t.a, t.c, t.f, t.n FROM unnest(c_app, c_container, c_field, c_delta) AS t(a, c, f, n)
            ON CONFLICT (shard, app_id, container_id, field) DO UPDATE SET n = fleet_counters.n + excluded.n;

            -- Removals come last: a group that resolves a device's alerts and then forgets it writes both.
            -- A version of 0: the device was planned on as not stored (erased in the group that created it).
            IF cardinality(r_app) > 0 THEN
                DELETE FROM devices x USING unnest(r_app, r_dev, r_version) AS t(a, d, v)
                WHERE x.app_id = t.a AND x.device_id = t.d AND (NOT guarded OR x.version = t.v);
                GET DIAGNOSTICS n = ROW_COUNT;
                IF guarded AND (n <> (SELECT count(*) FROM unnest(r_version) AS t(v) WHERE t.v > 0) OR EXISTS (
                    SELECT 1 FROM unnest(r_app, r_dev, r_version) AS t(a, d, v)
                    JOIN devices x ON x.app_id = t.a AND x.device_id = t.d WHERE t.v = 0))
                THEN
                    RAISE EXCEPTION 'synchealth: a removed device changed since it was read' USING ERRCODE = '40001';
                END IF;
                DELETE FROM alerts x USING unnest(r_app, r_dev, r_erased) AS t(a, d, e)
                WHERE t.e AND x.app_id = t.a AND x.device_id = t.d;
                IF cardinality(r_keys) > 0 THEN
                    DELETE FROM outbox WHERE ordering_key = ANY(r_keys);
                END IF;
            END IF;
            RETURN 0;
        END
        $$
        """
}
