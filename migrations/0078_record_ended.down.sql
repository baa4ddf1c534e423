-- Back to one table: the live table's and the months' rows copied into a plain table of the old
-- shape (key, indexes, identity, fillfactor), the keys to it from the ready,
-- claimed and traces tables back, the count deltas without their month.  The
-- functions go first (rolling back drops them; the next `up` re-creates them).

DO $flatten$
DECLARE
    next_value bigint := (SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END
                          FROM ai_marking_queue_seq_seq);
    runtime text := (SELECT value FROM aiqueue_meta WHERE key = 'runtime_role');
BEGIN
    ALTER TABLE ai_marking_queue RENAME TO ai_marking_queue_parted;
    CREATE TABLE ai_marking_queue (LIKE ai_marking_queue_parted INCLUDING DEFAULTS
        INCLUDING CONSTRAINTS INCLUDING GENERATED INCLUDING STORAGE INCLUDING COMPRESSION)
        WITH (fillfactor = 80);
    INSERT INTO ai_marking_queue (queue_id, seq, submission_id, assignment_id, run_id, status, priority, attempts,
        dispatch_seq, run_after, started_at, finished_at, progress, usage, last_error, created_at,
        updated_at, group_key, turn, refused_since, payload_id, not_before, expires_at, kind, pool,
        lane, deadline, batch_id, charged_tokens, charged_usd, charged_at, calibration,
        held_run_after, answer_key, leader_id, run_kind, queue_moves) OVERRIDING SYSTEM VALUE
    SELECT queue_id, seq, submission_id, assignment_id, run_id, status, priority, attempts,
        dispatch_seq, run_after, started_at, finished_at, progress, usage, last_error, created_at,
        updated_at, group_key, turn, refused_since, payload_id, not_before, expires_at, kind, pool,
        lane, deadline, batch_id, charged_tokens, charged_usd, charged_at, calibration,
        held_run_after, answer_key, leader_id, run_kind, queue_moves
    FROM ai_marking_queue_parted q;
    DROP TABLE ai_marking_queue_parted CASCADE;
    EXECUTE format('ALTER TABLE ai_marking_queue ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY'
                   ' (START WITH %s)', next_value);
    ALTER TABLE ai_marking_queue ENABLE ROW LEVEL SECURITY;
    IF runtime IS NOT NULL AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = runtime) THEN
        EXECUTE format('GRANT DELETE, INSERT, SELECT, UPDATE ON ai_marking_queue TO %I', runtime);
        EXECUTE format('CREATE POLICY aiqueue_runtime ON ai_marking_queue TO %I USING (true)'
                       ' WITH CHECK (true)', runtime);
    END IF;
END
$flatten$;

ALTER TABLE ai_marking_queue ADD PRIMARY KEY (queue_id);
ALTER TABLE ai_marking_queue ADD CONSTRAINT ai_marking_queue_submission_id_fkey
    FOREIGN KEY (submission_id) REFERENCES submissions (id) ON DELETE CASCADE;
CREATE INDEX ai_marking_queue_assignment_idx ON ai_marking_queue (assignment_id, created_at DESC);
CREATE INDEX ai_marking_queue_submission_idx ON ai_marking_queue (submission_id, created_at DESC);
CREATE INDEX ai_marking_queue_assignment_list_idx
    ON ai_marking_queue (assignment_id, phase, created_at DESC, queue_id DESC);
CREATE INDEX ai_marking_queue_group_list_idx
    ON ai_marking_queue (coalesce(group_key, assignment_id), phase, created_at DESC, queue_id DESC);
CREATE INDEX ai_marking_queue_list_idx ON ai_marking_queue (phase, created_at DESC, queue_id DESC);
CREATE INDEX ai_marking_queue_finished_idx
    ON ai_marking_queue (phase, finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX ai_marking_queue_live_run_idx ON ai_marking_queue (run_id) WHERE phase = 'live';
CREATE UNIQUE INDEX ai_marking_queue_active_uniq
    ON ai_marking_queue (submission_id, coalesce(payload_id, 0)) WHERE phase = 'live';
CREATE INDEX ai_marking_queue_answer_idx
    ON ai_marking_queue (answer_key, coalesce(group_key, assignment_id))
    WHERE answer_key IS NOT NULL AND leader_id IS NULL AND phase = 'live';
CREATE INDEX ai_marking_queue_batch_idx ON ai_marking_queue (batch_id) WHERE batch_id IS NOT NULL;
CREATE INDEX ai_marking_queue_calibration_idx ON ai_marking_queue (run_id) WHERE calibration;
CREATE INDEX ai_marking_queue_held_idx ON ai_marking_queue (run_id) WHERE held_run_after IS NOT NULL;

-- Rows of the ready, claimed and traces tables whose record row is gone (the
-- keys were not there to take them) go, so the keys can come back.
DELETE FROM ai_marking_ready r
WHERE NOT EXISTS (SELECT 1 FROM ai_marking_queue q WHERE q.queue_id = r.queue_id);
DELETE FROM ai_marking_claimed c
WHERE NOT EXISTS (SELECT 1 FROM ai_marking_queue q WHERE q.queue_id = c.queue_id);
DELETE FROM ai_marking_traces t
WHERE NOT EXISTS (SELECT 1 FROM ai_marking_queue q WHERE q.queue_id = t.queue_id);
ALTER TABLE ai_marking_ready ADD CONSTRAINT ai_marking_ready_queue_id_fkey
    FOREIGN KEY (queue_id) REFERENCES ai_marking_queue (queue_id) ON DELETE CASCADE;
ALTER TABLE ai_marking_claimed ADD CONSTRAINT ai_marking_claimed_queue_id_fkey
    FOREIGN KEY (queue_id) REFERENCES ai_marking_queue (queue_id) ON DELETE CASCADE;
ALTER TABLE ai_marking_traces ADD CONSTRAINT ai_marking_traces_queue_id_fkey
    FOREIGN KEY (queue_id) REFERENCES ai_marking_queue (queue_id) ON DELETE CASCADE;

-- The deltas of every month, folded into one row per status, kind and pool.
CREATE TEMPORARY TABLE aiqueue_counts_folded ON COMMIT DROP AS
SELECT status, kind, pool, sum(n)::bigint AS n FROM ai_marking_counts GROUP BY status, kind, pool;
DELETE FROM ai_marking_counts;
ALTER TABLE ai_marking_counts DROP COLUMN month;
INSERT INTO ai_marking_counts (status, kind, pool, n)
SELECT status, kind, pool, n FROM aiqueue_counts_folded;
