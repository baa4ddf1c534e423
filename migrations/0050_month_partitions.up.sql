-- Attempts, results and the live-event feed become range partitions by month
-- (docs/operating/data-protection.md, "Retention"): retention detaches and drops a month
-- whole instead of deleting its rows one by one.
--
-- No row is copied.  Each table is renamed `<table>_upto_YYYYMM` and attached,
-- rows and indexes as they are, as the partition of everything before the start
-- of next month (UTC); a new parent takes the table's name, with one partition
-- for next month and a default that catches any row no month holds (an insert
-- never fails).  The housekeeping creates later months ahead
-- (functions/97_partitions.sql).  What this holds a lock for is the catalog
-- work: the steps before it (0050_month_partitions.steps.sql) proved, under a
-- weak lock, that the old rows fit the bound, with a validated CHECK that ATTACH
-- then trusts instead of reading every row (without one, as on a database the
-- steps did not prepare, ATTACH makes that scan itself).  Measured in
-- docs/performance.md ("A year of a district").
--
-- The parents have no primary key: one would have to include the month key, and
-- building it on the old rows would be the long step this avoids.  Each
-- partition keeps its own (id, or queue_id for results), and the identity
-- columns keep counting on from where they were.
--
-- The attempts' foreign key to ai_marking_queue goes: a partition can be dropped
-- whole only when no key checks it, and every statement that writes an attempt
-- joins its queue row already.  The statements that delete queue rows (prune,
-- retention, erasure) delete their attempts themselves.

ALTER TABLE ai_marking_attempts DROP CONSTRAINT IF EXISTS ai_marking_attempts_queue_id_fkey;
-- Likewise the holds' key to their result (a key may not name a partitioned table
-- without its month): the statements that delete results delete their holds.
ALTER TABLE ai_marking_holds DROP CONSTRAINT IF EXISTS ai_marking_holds_queue_id_fkey;

-- The view reads the events' parent, re-created below.
DROP VIEW ai_marking_event_feed;

-- Per table: rename it and its indexes out of the way, create the partitioned
-- parent in its place (columns, defaults, checks; the identity restarted after
-- its last value) with the old table's non-unique indexes and keys (the same
-- definitions, so ATTACH reuses the old table's instead of building them), attach
-- the old table as everything before the start of next month, then add next
-- month and the default, each with its own primary key.
DO $partitions$
DECLARE
    t record;
    bound timestamptz;
    month_end timestamptz;
    suffix text;
    proof text;
    legacy text;
    next_value bigint;
    ix record;
    ddl text;
BEGIN
    FOR t IN SELECT * FROM (VALUES
        ('ai_marking_attempts', 'started_at', 'id', 'id', ARRAY[
            'CREATE INDEX ai_marking_attempts_queue_idx ON ai_marking_attempts (queue_id, id)',
            'CREATE INDEX ai_marking_attempts_batch_idx ON ai_marking_attempts (dispatch_ref)'
            ' WHERE dispatch_ref LIKE ''batch:%''',
            'CREATE INDEX ai_marking_attempts_started_idx ON ai_marking_attempts'
            ' USING brin (started_at)']),
        ('ai_marking_results', 'applied_at', 'seq', 'queue_id', ARRAY[
            'CREATE INDEX ai_marking_results_submission_idx ON ai_marking_results'
            ' (submission_id, seq)',
            'CREATE INDEX ai_marking_results_run_idx ON ai_marking_results (run_id)',
            'CREATE INDEX ai_marking_results_applied_idx ON ai_marking_results'
            ' USING brin (applied_at)',
            -- The old table's key is reused by ATTACH (the same definition), not checked again.
            'ALTER TABLE ai_marking_results ADD CONSTRAINT ai_marking_results_submission_id_fkey'
            ' FOREIGN KEY (submission_id) REFERENCES submissions (id) ON DELETE CASCADE']),
        ('ai_marking_events', 'created_at', 'id', 'id', ARRAY[
            'CREATE INDEX ai_marking_events_cursor_idx ON ai_marking_events'
            ' (assignment_id, tx, id)',
            'CREATE INDEX ai_marking_events_created_idx ON ai_marking_events'
            ' USING brin (created_at)'])
    ) AS v (name, key_column, ident, unique_column, parent_ddl)
    LOOP
        -- The bound the steps proved (their CHECK's name holds its month), else next month.
        proof := (SELECT k.conname FROM pg_constraint k
                  WHERE k.conrelid = to_regclass(t.name) AND k.contype = 'c' AND k.convalidated
                    AND k.conname ~ ('^' || t.name || '_before_[0-9]{6}$'));
        suffix := coalesce(right(proof, 6),
                           to_char(date_trunc('month', now() AT TIME ZONE 'UTC')
                                   + interval '1 month', 'YYYYMM'));
        bound := to_date(suffix, 'YYYYMM')::timestamp AT TIME ZONE 'UTC';
        month_end := (to_date(suffix, 'YYYYMM') + interval '1 month')::timestamp AT TIME ZONE 'UTC';
        legacy := t.name || '_upto_' || suffix;
        EXECUTE format('SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END'
                       ' FROM %s', pg_get_serial_sequence(t.name, t.ident)) INTO next_value;
        EXECUTE format('ALTER TABLE %I RENAME TO %I', t.name, legacy);
        FOR ix IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                  WHERE i.indrelid = to_regclass(legacy) LOOP
            -- A partition's index: its parent's name and the partition's own part.
            EXECUTE format('ALTER INDEX %I RENAME TO %I', ix.relname,
                           ix.relname || '_upto_' || suffix);
        END LOOP;
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I DROP IDENTITY', legacy, t.ident);
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS'
                       ' INCLUDING STORAGE INCLUDING COMPRESSION) PARTITION BY RANGE (%I)',
                       t.name, legacy, t.key_column);
        IF proof IS NOT NULL THEN
            -- Not the parent's: LIKE copied it, and a later month's rows must pass.
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', t.name, proof);
        END IF;
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I ADD GENERATED ALWAYS AS IDENTITY'
                       ' (START WITH %s)', t.name, t.ident, next_value);
        FOREACH ddl IN ARRAY t.parent_ddl LOOP
            EXECUTE ddl;
        END LOOP;
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%L)',
                       t.name, legacy, bound);
        IF proof IS NOT NULL THEN
            -- The partition's bound holds it now.
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', legacy, proof);
        END IF;
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                       t.name || '_m' || suffix, t.name, bound, month_end);
        EXECUTE format('ALTER TABLE %I ADD PRIMARY KEY (%I)', t.name || '_m' || suffix,
                       t.unique_column);
        EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', t.name || '_default', t.name);
        EXECUTE format('ALTER TABLE %I ADD PRIMARY KEY (%I)', t.name || '_default',
                       t.unique_column);
        FOR ix IN SELECT c.relname AS child, p.relname || '_' || part.tail AS named
                  FROM (VALUES ('m' || suffix), ('default')) AS part (tail)
                  JOIN pg_index x ON x.indrelid = to_regclass(t.name || '_' || part.tail)
                  JOIN pg_class c ON c.oid = x.indexrelid
                  JOIN pg_inherits i ON i.inhrelid = x.indexrelid
                  JOIN pg_class p ON p.oid = i.inhparent LOOP
            EXECUTE format('ALTER INDEX %I RENAME TO %I', ix.child, ix.named);
        END LOOP;
    END LOOP;
END
$partitions$;

CREATE VIEW ai_marking_event_feed AS
SELECT e.id, e.tx, b.k, e.assignment_id, b.queue_id, b.submission_id, e.status, e.summary,
       e.created_at
FROM ai_marking_events e
CROSS JOIN LATERAL (
    SELECT e.queue_id, e.submission_id, 0::bigint AS k WHERE e.queue_ids IS NULL
    UNION ALL
    SELECT u.queue_id, u.submission_id, u.k
    FROM unnest(e.queue_ids, e.submission_ids) WITH ORDINALITY AS u (queue_id, submission_id, k)
) b;
