-- Drift canaries (docs/canaries.md): a kind's canary runs and the rows each re-marks,
-- in tables of their own (a canary row is never a queue row: it is never applied,
-- listed, counted or notified as a mark), and the `drift` alert.

CREATE TABLE ai_marking_canary_runs (
    run_id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    kind text NOT NULL,
    pool text NOT NULL,
    trigger text NOT NULL CHECK (trigger IN ('schedule', 'model_change', 'manual')),
    lane text NOT NULL CHECK (lane IN ('live', 'batch')),
    -- running: rows out; finished: figures and verdict; skipped: `skipped` says why.
    state text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'finished', 'skipped')),
    skipped text,
    started_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    -- What a model_change run was started for (the result that reported it).
    trigger_model text,
    trigger_version text,
    -- What the canary's own results reported (the most frequent).
    model text,
    function_version text,
    rows integer NOT NULL DEFAULT 0,
    answered integer NOT NULL DEFAULT 0,
    exact float8,
    qwk float8,
    -- The yardstick it was compared with: the last passing (or accepted) canary.
    yardstick_run uuid,
    yardstick_exact float8,
    yardstick_qwk float8,
    cost_usd float8,
    passed boolean,
    -- An operator made this canary the yardstick (POST .../canary/{kind}/accept).
    accepted_at timestamptz,
    accepted_by text,
    -- On the batch lane: its provider batch (recorded 'submitting' before it is asked
    -- for, so a lost answer is looked for by its tag), then submitted, deleting, done.
    batch_state text CHECK (batch_state IN ('submitting', 'submitted', 'deleting', 'done')),
    batch_tag text,
    batch_id text,
    batch_files text[],
    batch_at timestamptz
);
-- One running canary per kind.
CREATE UNIQUE INDEX ai_marking_canary_runs_running_uniq ON ai_marking_canary_runs (kind)
    WHERE state = 'running';
CREATE INDEX ai_marking_canary_runs_kind_idx ON ai_marking_canary_runs (kind, started_at DESC);

-- A canary's rows: a reviewed result's submission, re-marked under that result's own
-- payload; only the marks are kept (score, max_score, criteria), never feedback.
CREATE TABLE ai_marking_canary_rows (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    run_id uuid NOT NULL REFERENCES ai_marking_canary_runs (run_id) ON DELETE CASCADE,
    source_queue_id uuid NOT NULL,
    submission_id uuid NOT NULL,
    assignment_id text NOT NULL,
    payload jsonb NOT NULL DEFAULT '{}'::jsonb,
    teacher jsonb NOT NULL,
    state text NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'sent', 'answered', 'failed')),
    sent_at timestamptz,
    answered_at timestamptz,
    marks jsonb,
    usage jsonb,
    model text,
    function_version text,
    cost_usd float8,
    error text
);
CREATE INDEX ai_marking_canary_rows_run_idx ON ai_marking_canary_rows (run_id, state);
CREATE INDEX ai_marking_canary_rows_submission_idx ON ai_marking_canary_rows (submission_id);
-- The usage report reads answered rows by time.
CREATE INDEX ai_marking_canary_rows_answered_idx ON ai_marking_canary_rows (answered_at)
    WHERE answered_at IS NOT NULL;

-- The drift alert: one open per kind (the others stay one open per alert and pool).
ALTER TABLE ai_queue_alerts DROP CONSTRAINT IF EXISTS ai_queue_alerts_alert_check;
ALTER TABLE ai_queue_alerts ADD CONSTRAINT ai_queue_alerts_alert_check
    CHECK (alert IN ('backlog_age', 'stalled', 'failure_spike', 'latency', 'drift'));
DROP INDEX IF EXISTS ai_queue_alerts_open_uniq;
CREATE UNIQUE INDEX ai_queue_alerts_open_uniq ON ai_queue_alerts (alert, pool)
    WHERE resolved_at IS NULL AND alert <> 'drift';
CREATE UNIQUE INDEX ai_queue_alerts_drift_uniq ON ai_queue_alerts (kind)
    WHERE resolved_at IS NULL AND alert = 'drift';
