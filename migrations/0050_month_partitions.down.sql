-- Back to one table each: the partitions' rows are copied into a plain table of
-- the old shape (indexes, identity, keys), and the partitions dropped.  An
-- attempt whose queue row is gone (the foreign key was not there to take it)
-- goes, so the key can come back.

DROP VIEW ai_marking_event_feed;

-- Per table: the partitioned parent renamed away, a plain table of its columns
-- filled from it, the parent and its partitions dropped, the identity counting
-- on, and what the lockdown gave the table (migrate up re-applies it all).
DO $flatten$
DECLARE
    t record;
    next_value bigint;
    runtime text := (SELECT value FROM aiqueue_meta WHERE key = 'runtime_role');
BEGIN
    FOR t IN SELECT * FROM (VALUES ('ai_marking_attempts', 'id'), ('ai_marking_results', 'seq'),
                                   ('ai_marking_events', 'id')) AS v (name, ident)
    LOOP
        EXECUTE format('SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END'
                       ' FROM %s', pg_get_serial_sequence(t.name, t.ident)) INTO next_value;
        EXECUTE format('ALTER TABLE %I RENAME TO %I', t.name, t.name || '_parted');
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS'
                       ' INCLUDING STORAGE INCLUDING COMPRESSION)', t.name, t.name || '_parted');
        EXECUTE format('INSERT INTO %I SELECT * FROM %I', t.name, t.name || '_parted');
        EXECUTE format('DROP TABLE %I CASCADE', t.name || '_parted');
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I ADD GENERATED ALWAYS AS IDENTITY'
                       ' (START WITH %s)', t.name, t.ident, next_value);
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t.name);
        IF runtime IS NOT NULL AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = runtime) THEN
            EXECUTE format('GRANT DELETE, INSERT, SELECT, UPDATE ON %I TO %I', t.name, runtime);
            EXECUTE format('CREATE POLICY aiqueue_runtime ON %I TO %I USING (true)'
                           ' WITH CHECK (true)', t.name, runtime);
        END IF;
    END LOOP;
END
$flatten$;

ALTER TABLE ai_marking_attempts ADD PRIMARY KEY (id);
CREATE INDEX ai_marking_attempts_queue_idx ON ai_marking_attempts (queue_id, id);
CREATE INDEX ai_marking_attempts_batch_idx ON ai_marking_attempts (dispatch_ref)
    WHERE dispatch_ref LIKE 'batch:%';
CREATE INDEX ai_marking_attempts_started_idx ON ai_marking_attempts USING brin (started_at);
DELETE FROM ai_marking_attempts a
WHERE NOT EXISTS (SELECT 1 FROM ai_marking_queue q WHERE q.queue_id = a.queue_id);
ALTER TABLE ai_marking_attempts ADD CONSTRAINT ai_marking_attempts_queue_id_fkey
    FOREIGN KEY (queue_id) REFERENCES ai_marking_queue (queue_id) ON DELETE CASCADE;

ALTER TABLE ai_marking_results ADD PRIMARY KEY (queue_id);
CREATE INDEX ai_marking_results_submission_idx ON ai_marking_results (submission_id, seq);
CREATE INDEX ai_marking_results_run_idx ON ai_marking_results (run_id);
CREATE INDEX ai_marking_results_applied_idx ON ai_marking_results USING brin (applied_at);
ALTER TABLE ai_marking_results ADD CONSTRAINT ai_marking_results_submission_id_fkey
    FOREIGN KEY (submission_id) REFERENCES submissions (id) ON DELETE CASCADE;
DELETE FROM ai_marking_holds h
WHERE NOT EXISTS (SELECT 1 FROM ai_marking_results m WHERE m.queue_id = h.queue_id);
ALTER TABLE ai_marking_holds ADD CONSTRAINT ai_marking_holds_queue_id_fkey
    FOREIGN KEY (queue_id) REFERENCES ai_marking_results (queue_id) ON DELETE CASCADE;

ALTER TABLE ai_marking_events ADD PRIMARY KEY (id);
CREATE INDEX ai_marking_events_cursor_idx ON ai_marking_events (assignment_id, tx, id);
CREATE INDEX ai_marking_events_created_idx ON ai_marking_events USING brin (created_at);

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
DO $invoker$
BEGIN
    IF current_setting('server_version_num')::int >= 150000 THEN
        ALTER VIEW ai_marking_event_feed SET (security_invoker = true);
    END IF;
END
$invoker$;
