/// The two server-side functions a commit group calls, one round trip each, as the current migrations leave them:
/// the read function (v5) and the write function (v17), and the trigger that tells transitions (v10). Shipped text:
/// never edit it; a change is a new migration with `CREATE OR REPLACE FUNCTION`. The write function's earlier
/// texts, which the migrations before v17 still run on a new database, are in `PostgresGroupSQL+Superseded.swift`.
enum PostgresGroupSQL {
    /// Reads what a group plans on, without holding a lock past the call: the listed devices with their versions;
    /// up to `due_limit` devices whose timers are due, claimed for `lease` microseconds (their `due_at` moves to
    /// the end of the lease, so another replica skips them, and takes them over if this one dies); the listed event
    /// ids already recorded; the counters (summed over the replicas' shards) of the listed containers and of the
    /// read devices' containers, or of every container; and every firing fleet alert.
    ///
    /// Rows: `d` device and `u` due device (a app, b device, state, n1 counted_at, n2 version, a2 container),
    /// `s` seen id (n1 device hash, b id), `c` count (a container, b field, n1 sum), `f` fleet alert (a container,
    /// n1 starts_at), `w` a digest of the webhook subscriptions (a), so that a replica reloads them when another
    /// one changed them.
    static let readFunction = """
        CREATE FUNCTION synchealth_read_group(
            apps text[], devs text[], hashes bigint[], ids text[], now_at bigint, due_limit integer, lease bigint,
            containers text[], all_containers boolean)
        RETURNS TABLE (kind text, a text, b text, state bytea, n1 bigint, n2 bigint)
        LANGUAGE plpgsql AS $$
        DECLARE
            r record;
            touched text[] := containers;
        BEGIN
            -- Each lookup is a subquery of its own (LIMIT keeps it one), so that it is an index probe whatever the
            -- table's statistics: a plan cached while the table was small would otherwise scan it whole.
            FOR r IN SELECT d.* FROM unnest(apps, devs) AS k(a, dv)
                CROSS JOIN LATERAL (SELECT x.app_id, x.device_id, x.state, x.counted_at, x.version, x.container_id FROM devices x
                                    WHERE x.app_id = k.a AND x.device_id = k.dv LIMIT 1) d
            LOOP
                kind := 'd'; a := r.app_id; b := r.device_id; state := r.state; n1 := r.counted_at; n2 := r.version;
                touched := touched || r.container_id;
                RETURN NEXT;
            END LOOP;
            -- Row by row, by tuple id (held while the row is locked): a probe whatever the statistics.
            FOR r IN SELECT x.ctid AS tid, x.app_id, x.device_id, x.state, x.counted_at, x.version, x.container_id FROM devices x
                WHERE x.due_at <= now_at ORDER BY x.due_at LIMIT due_limit FOR UPDATE SKIP LOCKED
            LOOP
                UPDATE devices SET due_at = now_at + lease WHERE ctid = r.tid;
                kind := 'u'; a := r.app_id; b := r.device_id; state := r.state; n1 := r.counted_at; n2 := r.version;
                touched := touched || r.container_id;
                RETURN NEXT;
            END LOOP;
            RETURN QUERY SELECT 's'::text, NULL::text, e.event_id, NULL::bytea, e.device_hash, 0::bigint FROM unnest(hashes, ids) AS k(h, i)
                CROSS JOIN LATERAL (SELECT x.event_id, x.device_hash FROM seen_events x WHERE x.device_hash = k.h AND x.event_id = k.i LIMIT 1) e;
            RETURN QUERY SELECT 'c'::text, fc.container_id, fc.field, NULL::bytea, sum(fc.n)::bigint, 0::bigint FROM fleet_counters fc
                WHERE fc.app_id = '' AND fc.container_id <> '' AND (all_containers OR fc.container_id = ANY(touched))
                GROUP BY fc.container_id, fc.field;
            RETURN QUERY SELECT 'f'::text, fa.container_id, NULL::text, NULL::bytea, fa.starts_at, 0::bigint FROM fleet_alerts fa;
            RETURN QUERY SELECT 'w'::text, md5(coalesce(string_agg(w.id || ' ' || w.url || ' ' || w.kinds || ' ' || w.secret || ' ' ||
                    coalesce(w.disabled_reason, '') || ' ' || w.options, ' ' ORDER BY w.id), '')), NULL::text, NULL::bytea, 0::bigint, 0::bigint
                FROM webhooks w;
        END
        $$
        """

    /// Migration v17's `synchealth_write_group`: v9's, with every look-up of `devices` and `alerts` a probe by key
    /// whatever the tables' statistics. PL/pgSQL caches a statement's plan for the connection's life; planned while
    /// the tables were nearly empty (a new database), v9's check that a device planned on as stored is still there
    /// hashed the whole `devices` table at each write, and its removals joined both tables by scanning them: the
    /// write's cost grew with the fleet until the connection closed (docs/benchmarks-log.md). `OFFSET 0` keeps the
    /// check a subquery run per row (PostgreSQL cannot turn it into a hashed one); removals run one device at a time.
    /// Replaces v9's body, same arguments and the same effects, so a replica of the release before runs on it.
    static let writeFunctionV17 = """
        CREATE OR REPLACE FUNCTION synchealth_write_group(
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
                WHERE t.x AND (NOT guarded OR t.v = 0 OR EXISTS (SELECT 1 FROM devices y WHERE y.app_id = t.a AND y.device_id = t.d OFFSET 0))
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
            WHERE NOT t.x AND (NOT guarded OR t.v = 0 OR EXISTS (SELECT 1 FROM devices y WHERE y.app_id = t.a AND y.device_id = t.d OFFSET 0))
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
            -- One statement a device, on its key: a join of the arrays with the table may be planned as a scan of
            -- it while the table is small, and that plan stays cached for the connection's life.
            FOR i IN 1..coalesce(cardinality(r_app), 0) LOOP
                DELETE FROM devices WHERE app_id = r_app[i] AND device_id = r_dev[i] AND (NOT guarded OR version = r_version[i]);
                GET DIAGNOSTICS n = ROW_COUNT;
                IF guarded AND (n <> (r_version[i] > 0)::integer OR (r_version[i] = 0
                    AND EXISTS (SELECT 1 FROM devices WHERE app_id = r_app[i] AND device_id = r_dev[i])))
                THEN
                    RAISE EXCEPTION 'synchealth: a removed device changed since it was read' USING ERRCODE = '40001';
                END IF;
                IF r_erased[i] THEN
                    DELETE FROM alerts WHERE app_id = r_app[i] AND device_id = r_dev[i];
                END IF;
            END LOOP;
            IF cardinality(r_keys) > 0 THEN
                DELETE FROM outbox WHERE ordering_key = ANY(r_keys);
            END IF;
            RETURN 0;
        END
        $$
        """

    /// Migration v10: every change of an alert row's state is told on `synchealth_transitions`, in commit order,
    /// to every replica that listens (`PostgresStore.followTransitions`). A trigger, so that a replica of the
    /// release before, writing through its own function, is heard too. Payload: `f`/`r` and the alert's id for a
    /// fire or resolve; `d`/`x` for a deleted firing/resolved alert.
    static let transitionTrigger = [
        """
        CREATE FUNCTION synchealth_notify_transition() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'DELETE' THEN
                PERFORM pg_notify('synchealth_transitions', (CASE WHEN OLD.state = 'firing' THEN 'd ' ELSE 'x ' END) || OLD.id);
            ELSIF TG_OP = 'INSERT' OR NEW.state IS DISTINCT FROM OLD.state THEN
                PERFORM pg_notify('synchealth_transitions', left(NEW.state, 1) || ' ' || NEW.id);
            END IF;
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE TRIGGER alerts_transitions AFTER INSERT OR UPDATE OF state OR DELETE ON alerts
        FOR EACH ROW EXECUTE FUNCTION synchealth_notify_transition()
        """,
    ]
}
