-- Month partitions of the history tables (docs/operating/data-protection.md, "Retention").
--
-- Attempts, results and the live-event feed are range-partitioned by month (UTC)
-- on the time each row was written: a month's rows leave by dropping its
-- partition, not by deleting them one by one on the tables the claim and the
-- settle use.  The housekeeping calls aiqueue_keep_partitions once a retention
-- pass runs (records/retention.py): it creates this month's and next month's
-- partitions ahead (nothing like pg_partman is needed, and not every plan of
-- Supabase or Neon has it), and detaches and drops a month whose every row is
-- past its keep period.  Rows of the month at the boundary are still deleted
-- row by row by the retention pass (sql/records.sql retain) and the prune.  The
-- doctor warns when next month's partition is missing (sql/doctor.sql).
--
-- A default partition catches a row that no month holds (the housekeeping has
-- not run for a month, or a row written with an old time): an insert never
-- fails.  A month created later takes its rows from the default.

-- The partitioned tables: the column each is partitioned by, and the column each
-- partition's own primary key is on (a parent's key would have to include the month).
CREATE OR REPLACE FUNCTION aiqueue_partitioned()
RETURNS TABLE (parent regclass, key_column text, unique_column text)
LANGUAGE sql STABLE AS $$
    VALUES ('ai_marking_attempts'::regclass, 'started_at', 'id'),
           ('ai_marking_results'::regclass, 'applied_at', 'queue_id'),
           ('ai_marking_events'::regclass, 'created_at', 'id'),
           ('ai_marking_queue_ended'::regclass, 'created_at', 'queue_id')
$$;

-- Every partition of those tables with its range (lower_bound NULL: MINVALUE, the
-- rows from before the upgrade; the default has neither bound).
CREATE OR REPLACE FUNCTION aiqueue_partitions()
RETURNS TABLE (parent regclass, part regclass, name text, is_default boolean,
               lower_bound timestamptz, upper_bound timestamptz, main_bytes bigint)
LANGUAGE sql STABLE AS $$
    SELECT p.parent, c.oid::regclass, c.relname::text, b.bound = 'DEFAULT',
           (regexp_match(b.bound, 'FROM \(''([^'']*)''\)'))[1]::timestamptz,
           (regexp_match(b.bound, 'TO \(''([^'']*)''\)'))[1]::timestamptz,
           pg_relation_size(c.oid)
    FROM aiqueue_partitioned() p
    JOIN pg_inherits i ON i.inhparent = p.parent
    JOIN pg_class c ON c.oid = i.inhrelid
    CROSS JOIN LATERAL (SELECT pg_get_expr(c.relpartbound, c.oid) AS bound) b
$$;

-- A new partition gets what the lockdown (sql/lockdown.sql) gives every queue
-- table: row-level security, the runtime role's policy and privileges, and no
-- other role's (a platform's default privileges handed some out at CREATE).
CREATE OR REPLACE FUNCTION aiqueue_partition_lock(p_table regclass)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    runtime text := (SELECT m.value FROM aiqueue_meta m WHERE m.key = 'runtime_role');
    who record;
BEGIN
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', p_table);
    FOR who IN
        SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END AS role
        FROM pg_class c, aclexplode(coalesce(c.relacl, acldefault('r'::"char", c.relowner))) a
        LEFT JOIN pg_roles r ON r.oid = a.grantee
        WHERE c.oid = p_table AND a.grantee <> c.relowner AND (a.grantee = 0 OR r.oid IS NOT NULL)
    LOOP
        EXECUTE format('REVOKE ALL ON TABLE %s FROM %s', p_table, who.role);
    END LOOP;
    IF runtime IS NOT NULL AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = runtime) THEN
        EXECUTE format('GRANT DELETE, INSERT, SELECT, UPDATE ON TABLE %s TO %I', p_table, runtime);
        EXECUTE format('CREATE POLICY aiqueue_runtime ON %s TO %I USING (true) WITH CHECK (true)',
                       p_table, runtime);
    END IF;
END
$$;

-- The partition of `p_parent` for the month starting `p_month` (UTC), unless a
-- partition already covers any of it.  Rows the default caught for that month
-- move into it first (ATTACH refuses while the default holds them).  True when
-- it created one.
CREATE OR REPLACE FUNCTION aiqueue_partition_add(p_parent regclass, p_key text, p_unique text,
                                                 p_month timestamp)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    lo timestamptz := p_month AT TIME ZONE 'UTC';
    hi timestamptz := (p_month + interval '1 month') AT TIME ZONE 'UTC';
    -- Schema-qualified: a definer's search_path starts with pg_catalog (sql/lockdown.sql).
    part text := (SELECT format('%I.%I', n.nspname, c.relname || '_m' || to_char(p_month, 'YYYYMM'))
                  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE c.oid = p_parent);
    fallback regclass;
    caught boolean;
    ix record;
BEGIN
    IF EXISTS (SELECT 1 FROM aiqueue_partitions() x
               WHERE x.parent = p_parent AND NOT x.is_default
                 AND coalesce(x.lower_bound, '-infinity') < hi AND x.upper_bound > lo) THEN
        RETURN false;
    END IF;
    fallback := (SELECT x.part FROM aiqueue_partitions() x
                 WHERE x.parent = p_parent AND x.is_default);
    -- The record's ended rows are updated in place (a review, a re-mark): one the
    -- default caught is never moved (an update may be writing it), so its month
    -- waits until the default holds none of it (the doctor warns meanwhile;
    -- months are made two ahead).
    IF p_parent = 'ai_marking_queue_ended'::regclass AND fallback IS NOT NULL THEN
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s WHERE %I >= $1 AND %I < $2)',
                       fallback, p_key, p_key) INTO caught USING lo, hi;
        IF caught THEN
            RETURN false;
        END IF;
    END IF;
    EXECUTE format('CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS'
                   ' INCLUDING GENERATED INCLUDING STORAGE INCLUDING COMPRESSION)', part, p_parent);
    -- An attempt's line is updated by its result, an ended record row by a review
    -- or a re-mark: room on the page for a heap-only update (aiqueue 0062, 0078).
    IF p_parent IN ('ai_marking_attempts'::regclass, 'ai_marking_queue_ended'::regclass) THEN
        EXECUTE format('ALTER TABLE %s SET (fillfactor = 80)', part);
    END IF;
    IF fallback IS NOT NULL AND p_parent <> 'ai_marking_queue_ended'::regclass THEN
        EXECUTE format('WITH moved AS (DELETE FROM %s WHERE %I >= $1 AND %I < $2 RETURNING *)'
                       ' INSERT INTO %s SELECT * FROM moved', fallback, p_key, p_key, part)
            USING lo, hi;
    END IF;
    EXECUTE format('ALTER TABLE %s ADD PRIMARY KEY (%I)', part, p_unique);
    EXECUTE format('ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%L) TO (%L)',
                   p_parent, part, lo, hi);
    -- Each of its indexes named as its parent's, with the month (migration 0050's
    -- rule; a long name cut to leave the month room in PostgreSQL's 63 bytes).
    FOR ix IN SELECT c.oid::regclass AS child,
                     left(p.relname, 55) || '_m' || to_char(p_month, 'YYYYMM') AS named
              FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
              JOIN pg_inherits i ON i.inhrelid = x.indexrelid
              JOIN pg_class p ON p.oid = i.inhparent
              WHERE x.indrelid = part::regclass LOOP
        EXECUTE format('ALTER INDEX %s RENAME TO %I', ix.child, ix.named);
    END LOOP;
    PERFORM aiqueue_partition_lock(part::regclass);
    RETURN true;
END
$$;

-- Create this month's and the next `p_ahead` months' partitions, and detach and
-- drop each month whose end is older than its table's keep period: attempts and
-- results `p_history_seconds` (QUEUE_RETAIN_HISTORY_DAYS), live events
-- `p_events_seconds` (a day).  At most once per `p_every_seconds` across every
-- instance (the control row is the gate); it runs before the row-by-row pass,
-- which then finds only the month at the boundary (and the rows from before the
-- upgrade, until their partition's end is past the period too).  First the
-- hours of usage that /ai-queue's cost card reads are summed (96_usage_hours.sql),
-- before any DETACH: a DETACH holds its parent's strongest lock until the
-- transaction ends, and every settle writes to the parent, so nothing that
-- reads for long runs after one.  The hours summed are inside the keep period,
-- never those of a month this pass drops.
-- Each change waits at most 100 ms for its lock
-- (DETACH and ATTACH lock the parent briefly; a queued lock would hold up every
-- settle behind it) and is otherwise left for the next pass.  Runs with its
-- owner's rights: the runtime role may not create or drop tables.
-- The record's months (98_record_months.sql) go when every row of theirs is
-- past its period: completed rows `p_completed_seconds` after they ended
-- (QUEUE_PRUNE_AFTER_DAYS), failed, cancelled and expired ones
-- `p_ended_seconds` (QUEUE_RETAIN_ENDED_DAYS); NULL keeps them.  An attempts
-- month goes with them once no record row created before its end is left.
CREATE OR REPLACE FUNCTION aiqueue_keep_partitions(p_history_seconds float8,
                                                   p_every_seconds float8 DEFAULT 60,
                                                   p_events_seconds float8 DEFAULT 86400,
                                                   p_ahead integer DEFAULT 1,
                                                   p_completed_seconds float8 DEFAULT NULL,
                                                   p_ended_seconds float8 DEFAULT NULL)
RETURNS TABLE (created integer, dropped integer)
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    t record;
    part record;
    this_month timestamp := date_trunc('month', now() AT TIME ZONE 'UTC');
    m timestamp;
BEGIN
    created := 0;
    dropped := 0;
    UPDATE ai_queue_control SET last_partitions_at = now()
    WHERE id = 1 AND last_partitions_at < now() - make_interval(secs => p_every_seconds);
    IF NOT FOUND THEN
        RETURN NEXT;
        RETURN;
    END IF;
    -- The cost card's hourly sums follow the results' months (96_usage_hours.sql).
    PERFORM aiqueue_usage_roll(p_history_seconds);
    PERFORM set_config('lock_timeout', '100ms', true);
    -- The record first: its drops free the attempts' months below.
    FOR t IN SELECT * FROM aiqueue_partitioned()
             ORDER BY parent <> 'ai_marking_queue_ended'::regclass LOOP
        FOR m IN SELECT g FROM generate_series(this_month, this_month + make_interval(months => p_ahead),
                                               interval '1 month') g LOOP
            BEGIN
                IF aiqueue_partition_add(t.parent, t.key_column, t.unique_column, m) THEN
                    created := created + 1;
                END IF;
            EXCEPTION WHEN lock_not_available THEN
                NULL;  -- busy: the next pass
            END;
        END LOOP;
        IF t.parent = 'ai_marking_queue_ended'::regclass THEN
            dropped := dropped + aiqueue_record_months_drop(p_completed_seconds, p_ended_seconds);
            CONTINUE;
        END IF;
        FOR part IN
            SELECT x.part FROM aiqueue_partitions() x
            WHERE x.parent = t.parent AND NOT x.is_default
              AND (x.upper_bound <= now() - make_interval(secs => CASE
                       WHEN t.parent = 'ai_marking_events'::regclass THEN p_events_seconds
                       ELSE p_history_seconds END)
                   OR (t.parent = 'ai_marking_attempts'::regclass
                       AND aiqueue_record_gone_before(x.upper_bound)))
        LOOP
            BEGIN
                EXECUTE format('ALTER TABLE %s DETACH PARTITION %s', t.parent, part.part);
                EXECUTE format('DROP TABLE %s', part.part);
                dropped := dropped + 1;
                -- A held result's hold goes with its month (held when it was applied).
                IF t.parent = 'ai_marking_results'::regclass THEN
                    DELETE FROM ai_marking_holds h
                    WHERE NOT EXISTS (SELECT 1 FROM ai_marking_results m
                                      WHERE m.queue_id = h.queue_id);
                END IF;
            EXCEPTION WHEN lock_not_available THEN
                NULL;
            END;
        END LOOP;
    END LOOP;
    RETURN NEXT;
END
$$;
