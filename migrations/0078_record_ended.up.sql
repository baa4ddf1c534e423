-- The record (ai_marking_queue) in two parts (docs/architecture.md, "The
-- record: live rows and ended months"):
--
--   ai_marking_queue              list-partitioned by whether a row is live
--     ai_marking_queue_live       pending and processing rows: a plain table
--     ai_marking_queue_ended      every other row, range-partitioned by the
--                                 month it was created (UTC)
--
-- A row's end moves it from the live table to its month (PostgreSQL moves a
-- row whose update changes its partition: a delete and an insert), so the
-- live table's indexes hold only live rows and its updates (a claim, a
-- retry's wait) stay heap-only, and retention detaches and drops a month of
-- ended rows whole (functions/98_record_months.sql) instead of deleting them
-- one by one (docs/operating/data-protection.md, "Retention by the month").
-- A retry moves a row back.  The hot statements name the live table itself
-- (the claim, the settle's reads), so they lock one table and its indexes as
-- before.
--
-- The upgrade, when its preparation steps (0078_record_ended.steps.sql) have
-- copied the ended rows into ai_marking_queue_ended_upto_YYYYMM and kept them
-- since: attaches that copy as the month partition of every ended row created
-- before YYYYMM (its check says so: ATTACH reads no row), moves the rest of the
-- old table (the live rows, and any ended row created after) through the new
-- record, and drops the old table.  Without them (a schema older than 0077, or
-- a trigger someone disabled in between), the one-lock path: it moves the live
-- rows into the live table and attaches the old table, rows and indexes as they
-- are, as that month partition; ATTACH reads the old table once to check that,
-- under the upgrade's lock.  docs/performance.md, "A year of a district", gives
-- both times for a million rows.
--
-- What a partitioned table cannot have, and what stands in for it:
-- * A primary key or unique index on the parent must include the partition
--   key.  Each partition keeps its own key on queue_id (ids are random uuids),
--   and the live table the "one live row per submission and payload" index.
-- * A foreign key to the record from the ready, claimed and traces tables: they
--   go (a month could not be dropped while one checked it).  A statement
--   trigger on the record deletes their rows with a record row instead
--   (functions/35_ready.sql).
-- * Functions whose arguments are the record's row type are bound to the old
--   table's type: they are dropped here, and `up` re-creates them on the new one.

DO $record$
DECLARE
    -- The old rows' bound: the start of next month, or of the month after the
    -- newest row's (a row written by host SQL with a later time), read from the
    -- list index's head for each phase.
    newest timestamptz := (SELECT max(n.created_at)
                           FROM unnest(ARRAY['live', 'completed', 'failed', 'cancelled',
                                             'expired']) AS p (phase),
                           LATERAL (SELECT q.created_at FROM ai_marking_queue q
                                    WHERE q.phase = p.phase
                                    ORDER BY q.created_at DESC LIMIT 1) n);
    -- The copy the preparation steps made and kept, with its trigger still on.
    prepared text := (SELECT c.relname FROM pg_class c
                      WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
                        AND NOT c.relispartition
                        AND c.relname ~ '^ai_marking_queue_ended_upto_[0-9]{6}$'
                        AND obj_description(c.oid, 'pg_class') = 'aiqueue 0078: copied'
                        AND EXISTS (SELECT 1 FROM pg_trigger t
                                    WHERE t.tgrelid = 'ai_marking_queue'::regclass
                                      AND t.tgname = 'aiqueue_upgrade_0078_mirror'
                                      AND t.tgenabled = 'A'));
    suffix text := coalesce(right(prepared, 6),
                            to_char(greatest(date_trunc('month', now() AT TIME ZONE 'UTC'),
                                             date_trunc('month', newest AT TIME ZONE 'UTC'))
                                    + interval '1 month', 'YYYYMM'));
    bound timestamptz := to_date(suffix, 'YYYYMM')::timestamp AT TIME ZONE 'UTC';
    month_end timestamptz := (to_date(suffix, 'YYYYMM') + interval '1 month')::timestamp
                             AT TIME ZONE 'UTC';
    legacy text := 'ai_marking_queue_ended_upto_' || suffix;
    -- The old table's name while the new record is built: the month it becomes,
    -- or, with a copy, a name of its own until it is dropped.
    old text := CASE WHEN prepared IS NULL THEN legacy ELSE 'ai_marking_queue_before_0078' END;
    columns text;
    next_value bigint;
    f record;
    ix record;
BEGIN
    -- A copy the upgrade does not use (its trigger was switched off in between) goes.
    FOR f IN SELECT c.relname FROM pg_class c
             WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
               AND NOT c.relispartition AND c.relname ~ '^ai_marking_queue_ended_upto_[0-9]{6}$'
               AND c.relname IS DISTINCT FROM prepared LOOP
        EXECUTE format('DROP TABLE %I', f.relname);
    END LOOP;
    FOR f IN SELECT p.oid::regprocedure AS sig
             FROM pg_proc p, (SELECT oid, typarray FROM pg_type
                              WHERE oid = 'ai_marking_queue'::regtype) t
             WHERE p.pronamespace = current_schema()::regnamespace
               AND (p.prorettype IN (t.oid, t.typarray)
                    OR p.proargtypes::oid[] && ARRAY[t.oid, t.typarray]
                    OR coalesce(p.proallargtypes, '{}') && ARRAY[t.oid, t.typarray]) LOOP
        EXECUTE format('DROP FUNCTION %s', f.sig);
    END LOOP;
    FOR f IN SELECT tgname FROM pg_trigger
             WHERE tgrelid = 'ai_marking_queue'::regclass AND NOT tgisinternal LOOP
        EXECUTE format('DROP TRIGGER %I ON ai_marking_queue', f.tgname);
    END LOOP;
    ALTER TABLE ai_marking_ready DROP CONSTRAINT IF EXISTS ai_marking_ready_queue_id_fkey;
    ALTER TABLE ai_marking_claimed DROP CONSTRAINT IF EXISTS ai_marking_claimed_queue_id_fkey;
    ALTER TABLE ai_marking_traces DROP CONSTRAINT IF EXISTS ai_marking_traces_queue_id_fkey;
    DROP FUNCTION IF EXISTS aiqueue_upgrade_0078_mirror();

    next_value := (SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END
                   FROM ai_marking_queue_seq_seq);
    EXECUTE format('ALTER TABLE ai_marking_queue RENAME TO %I', old);
    FOR ix IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
              WHERE i.indrelid = to_regclass(old) LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', ix.relname,
                       replace(ix.relname, 'ai_marking_queue_', old || '_'));
    END LOOP;
    EXECUTE format('ALTER TABLE %I ALTER COLUMN seq DROP IDENTITY', old);
    EXECUTE format('CREATE TABLE ai_marking_queue (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS'
                   ' INCLUDING GENERATED INCLUDING STORAGE INCLUDING COMPRESSION)'
                   ' PARTITION BY LIST ((status IN (''pending'', ''processing'')))', old);
    EXECUTE format('ALTER TABLE ai_marking_queue ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY'
                   ' (START WITH %s)', next_value);
    CREATE TABLE ai_marking_queue_live PARTITION OF ai_marking_queue FOR VALUES IN (true)
        WITH (fillfactor = 80);
    CREATE TABLE ai_marking_queue_ended PARTITION OF ai_marking_queue FOR VALUES IN (false)
        PARTITION BY RANGE (created_at);
    -- The live rows into the live table first, with their own seq (the identity's):
    -- its indexes and the key below are then built from them, not written row by
    -- row (the lock is held for the live rows: docs/performance.md).
    columns := (SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum)
                FROM pg_attribute a
                WHERE a.attrelid = to_regclass(old) AND a.attnum > 0
                  AND NOT a.attisdropped AND a.attgenerated = '');
    EXECUTE format('%s INSERT INTO ai_marking_queue_live (%s) OVERRIDING SYSTEM VALUE'
                   ' SELECT %s FROM %s',
                   CASE WHEN prepared IS NULL
                        THEN format('WITH moved AS (DELETE FROM %I WHERE status IN'
                                    ' (''pending'', ''processing'') RETURNING %s)', old, columns)
                        ELSE '' END,
                   columns, columns,
                   CASE WHEN prepared IS NULL THEN 'moved'
                        ELSE format('%I WHERE phase = ''live''', old) END);
    -- The old table's own indexes and key, by the same definitions: ATTACH takes them
    -- over instead of building them.
    ALTER TABLE ai_marking_queue ADD CONSTRAINT ai_marking_queue_submission_id_fkey
        FOREIGN KEY (submission_id) REFERENCES submissions (id) ON DELETE CASCADE;
    CREATE INDEX ai_marking_queue_assignment_idx ON ai_marking_queue (assignment_id, created_at DESC);
    CREATE INDEX ai_marking_queue_submission_idx ON ai_marking_queue (submission_id, created_at DESC);
    CREATE INDEX ai_marking_queue_assignment_list_idx
        ON ai_marking_queue (assignment_id, phase, created_at DESC, queue_id DESC);
    CREATE INDEX ai_marking_queue_group_list_idx
        ON ai_marking_queue (coalesce(group_key, assignment_id), phase, created_at DESC,
                             queue_id DESC);
    CREATE INDEX ai_marking_queue_list_idx ON ai_marking_queue (phase, created_at DESC, queue_id DESC);
    CREATE INDEX ai_marking_queue_finished_idx
        ON ai_marking_queue (phase, finished_at) WHERE finished_at IS NOT NULL;
    CREATE INDEX ai_marking_queue_live_run_idx ON ai_marking_queue (run_id) WHERE phase = 'live';
    CREATE INDEX ai_marking_queue_answer_idx
        ON ai_marking_queue (answer_key, coalesce(group_key, assignment_id))
        WHERE answer_key IS NOT NULL AND leader_id IS NULL AND phase = 'live';
    CREATE INDEX ai_marking_queue_batch_idx ON ai_marking_queue (batch_id) WHERE batch_id IS NOT NULL;
    CREATE INDEX ai_marking_queue_calibration_idx ON ai_marking_queue (run_id) WHERE calibration;
    CREATE INDEX ai_marking_queue_held_idx ON ai_marking_queue (run_id)
        WHERE held_run_after IS NOT NULL;
    -- The two parts' indexes named as the record's, with the part (a month's
    -- name adds its own: 97_partitions.sql).
    FOR ix IN SELECT c.oid::regclass AS child,
                     replace(p.relname, 'ai_marking_queue_', 'ai_marking_queue_' || part.tail || '_')
                         AS named
              FROM (VALUES ('live'), ('ended')) AS part (tail)
              JOIN pg_index x ON x.indrelid = to_regclass('ai_marking_queue_' || part.tail)
              JOIN pg_class c ON c.oid = x.indexrelid
              JOIN pg_inherits i ON i.inhrelid = x.indexrelid
              JOIN pg_class p ON p.oid = i.inhparent LOOP
        EXECUTE format('ALTER INDEX %s RENAME TO %I', ix.child, ix.named);
    END LOOP;
    ALTER TABLE ai_marking_queue_live ADD PRIMARY KEY (queue_id);
    CREATE UNIQUE INDEX ai_marking_queue_active_uniq_live
        ON ai_marking_queue_live (submission_id, coalesce(payload_id, 0)) WHERE phase = 'live';

    EXECUTE format('ALTER TABLE ai_marking_queue_ended ATTACH PARTITION %I'
                   ' FOR VALUES FROM (MINVALUE) TO (%L)', legacy, bound);
    IF prepared IS NOT NULL THEN
        EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', legacy, legacy || '_bound');
        EXECUTE format('COMMENT ON TABLE %I IS NULL', legacy);
    END IF;
    -- Next month and the default, each with its own key and the room a heap-only
    -- update needs (fillfactor 80, as 0067 gave the record: a review, a re-mark).
    FOR ix IN SELECT * FROM (VALUES ('ai_marking_queue_ended_m' || suffix,
                                     format('FOR VALUES FROM (%L) TO (%L)', bound, month_end)),
                                    ('ai_marking_queue_ended_default', 'DEFAULT')) AS v (part, spec) LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF ai_marking_queue_ended %s'
                       ' WITH (fillfactor = 80)', ix.part, ix.spec);
        EXECUTE format('ALTER TABLE %I ADD PRIMARY KEY (queue_id)', ix.part);
    END LOOP;
    FOR ix IN SELECT c.oid::regclass AS child, p.relname || '_' || part.tail AS named
              FROM (VALUES ('m' || suffix), ('default')) AS part (tail)
              JOIN pg_index x ON x.indrelid = to_regclass('ai_marking_queue_ended_' || part.tail)
              JOIN pg_class c ON c.oid = x.indexrelid
              JOIN pg_inherits i ON i.inhrelid = x.indexrelid
              JOIN pg_class p ON p.oid = i.inhparent LOOP
        EXECUTE format('ALTER INDEX %s RENAME TO %I', ix.child, ix.named);
    END LOOP;
    IF prepared IS NOT NULL THEN
        -- What the copy and the live table do not hold: an ended row created at
        -- or after the copy's bound (host SQL), probed by the list index.
        EXECUTE format('INSERT INTO ai_marking_queue (%2$s) OVERRIDING SYSTEM VALUE'
                       ' SELECT %2$s FROM %1$I'
                       ' WHERE phase IN (''completed'', ''failed'', ''cancelled'', ''expired'')'
                       '   AND created_at >= %3$L', old, columns, bound);
        EXECUTE format('DROP TABLE %I', old);
    END IF;
END
$record$;

-- The count deltas carry the month of their rows (NULL: every row from before
-- this upgrade), so that a month's drop takes its counts with it.
ALTER TABLE ai_marking_counts ADD COLUMN month timestamptz;

-- The parent's statistics: 0078_record_ended.after.sql, once this is committed.
