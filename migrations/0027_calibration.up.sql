-- aiqueue 0027: a calibration gate before the whole class (docs/agreement.md).
--
-- A run that asked for calibration has a row here: how many rows it marks
-- first, the thresholds that release the rest by themselves, and when it was
-- released and when its calibration rows had all ended (the moment
-- marking.calibration_ready was written, at most once).
CREATE TABLE ai_marking_runs (
    run_id uuid PRIMARY KEY,
    assignment_id text NOT NULL,
    calibration_rows integer NOT NULL,
    release_when jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    released_at timestamptz,
    released_by text,
    ready_at timestamptz
);

-- A calibration row is marked first.  A held row is pending and waits for its
-- run's release: its run_after is pushed past any claim's horizon, so the
-- claim's walk steps over it without a test of its own (its group's due_at
-- learns the far date, and the release's earlier run_after clears it:
-- aiqueue_fair_sooner), and held_run_after keeps the run_after it gets back.
ALTER TABLE ai_marking_queue
    ADD COLUMN calibration boolean NOT NULL DEFAULT false,
    ADD COLUMN held_run_after timestamptz;
CREATE INDEX ai_marking_queue_held_idx ON ai_marking_queue (run_id)
    WHERE held_run_after IS NOT NULL;
CREATE INDEX ai_marking_queue_calibration_idx ON ai_marking_queue (run_id)
    WHERE calibration;

-- The outbox carries every marking.* event: one pattern, rather than a list that
-- each new event's migration would have to repeat.
ALTER TABLE ai_marking_outbox DROP CONSTRAINT IF EXISTS ai_marking_outbox_type_check;
ALTER TABLE ai_marking_outbox ADD CONSTRAINT ai_marking_outbox_type_check
    CHECK (type ~ '^marking\.[a-z_]+$');
