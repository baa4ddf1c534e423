-- The record (ai_marking_queue) becomes range partitions by the month its rows
-- were created (UTC), as the history tables did in 0050: retention detaches
-- and drops a month of ended rows whole (functions/97_partitions.sql) instead
-- of deleting them one by one on a table every claim and settle writes
-- (docs/operating/data-protection.md, "Retention by the month").  A row never
-- changes its month (created_at is written once), so no update moves a row
-- between partitions.
--
-- No row is copied: the table is renamed `ai_marking_queue_upto_YYYYMM` and
-- attached, rows and indexes as they are, as the partition of everything
-- before the start of next month; a new parent takes its name, with the next
-- month's partition and a default.  The steps before it
-- (0078_record_months.steps.sql) proved the bound under a weak lock, so ATTACH
-- reads no row.
--
-- What a partitioned table cannot have, and what stands in for it:
-- * A primary key or unique index on the parent must include the month.  Each
--   partition keeps its own key on queue_id (ids are random uuids), and its own
--   "one live row per submission and payload" index: an enqueue inserts into
--   this month's partition, and its snapshot's look for a live row reads every
--   month (sql/enqueue.sql).
-- * A foreign key to the record from the ready, claimed and traces tables: they
--   go (a month could not be dropped while one checked it, and the claim and
--   the settle no longer check them).  A statement trigger on the record
--   deletes their rows with a record row instead (functions/35_ready.sql).
-- * Functions whose arguments are the record's row type are bound to the old
--   table's type: they are dropped here, and `up` re-creates them on the new one.

DO $record$
DECLARE
    proof text := (SELECT k.conname FROM pg_constraint k
                   WHERE k.conrelid = 'ai_marking_queue'::regclass AND k.contype = 'c'
                     AND k.convalidated AND k.conname ~ '^ai_marking_queue_before_[0-9]{6}$');
    suffix text := coalesce(right(proof, 6),
                            to_char(date_trunc('month', now() AT TIME ZONE 'UTC')
                                    + interval '1 month', 'YYYYMM'));
    bound timestamptz := to_date(suffix, 'YYYYMM')::timestamp AT TIME ZONE 'UTC';
    month_end timestamptz := (to_date(suffix, 'YYYYMM') + interval '1 month')::timestamp
                             AT TIME ZONE 'UTC';
    legacy text := 'ai_marking_queue_upto_' || suffix;
    next_value bigint;
    f record;
    ix record;
BEGIN
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

    next_value := (SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END
                   FROM ai_marking_queue_seq_seq);
    EXECUTE format('ALTER TABLE ai_marking_queue RENAME TO %I', legacy);
    FOR ix IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
              WHERE i.indrelid = to_regclass(legacy) LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', ix.relname, ix.relname || '_upto_' || suffix);
    END LOOP;
    EXECUTE format('ALTER TABLE %I ALTER COLUMN seq DROP IDENTITY', legacy);
    EXECUTE format('CREATE TABLE ai_marking_queue (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS'
                   ' INCLUDING GENERATED INCLUDING STORAGE INCLUDING COMPRESSION)'
                   ' PARTITION BY RANGE (created_at)', legacy);
    IF proof IS NOT NULL THEN
        EXECUTE format('ALTER TABLE ai_marking_queue DROP CONSTRAINT %I', proof);
    END IF;
    EXECUTE format('ALTER TABLE ai_marking_queue ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY'
                   ' (START WITH %s)', next_value);
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

    EXECUTE format('ALTER TABLE ai_marking_queue ATTACH PARTITION %I'
                   ' FOR VALUES FROM (MINVALUE) TO (%L)', legacy, bound);
    IF proof IS NOT NULL THEN
        EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', legacy, proof);
    END IF;
    -- Next month and the default, each with its own key, its live rows' unique index
    -- and the room a heap-only update needs (fillfactor 80, as 0067 gave the record).
    FOR ix IN SELECT * FROM (VALUES ('ai_marking_queue_m' || suffix,
                                     format('FOR VALUES FROM (%L) TO (%L)', bound, month_end)),
                                    ('ai_marking_queue_default', 'DEFAULT')) AS v (part, spec) LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF ai_marking_queue %s WITH (fillfactor = 80)',
                       ix.part, ix.spec);
        EXECUTE format('ALTER TABLE %I ADD PRIMARY KEY (queue_id)', ix.part);
        EXECUTE format('CREATE UNIQUE INDEX %I ON %I (submission_id, coalesce(payload_id, 0))'
                       ' WHERE phase = ''live''', 'ai_marking_queue_active_uniq_'
                       || substr(ix.part, length('ai_marking_queue_') + 1), ix.part);
    END LOOP;
    FOR ix IN SELECT c.relname AS child, p.relname || '_' || part.tail AS named
              FROM (VALUES ('m' || suffix), ('default')) AS part (tail)
              JOIN pg_index x ON x.indrelid = to_regclass('ai_marking_queue_' || part.tail)
              JOIN pg_class c ON c.oid = x.indexrelid
              JOIN pg_inherits i ON i.inhrelid = x.indexrelid
              JOIN pg_class p ON p.oid = i.inhparent LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', ix.child, ix.named);
    END LOOP;
END
$record$;

-- The count deltas carry the month of their rows (NULL: every row from before
-- this upgrade), so that a month's drop takes its counts with it.
ALTER TABLE ai_marking_counts ADD COLUMN month timestamptz;

-- A partitioned parent's statistics are gathered by ANALYZE only (autovacuum
-- analyzes its partitions); the planner reads them for the parent's joins.
ANALYZE ai_marking_queue;
