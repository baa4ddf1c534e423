-- aiqueue 0018: time (docs/operating/alerts.md): not before, expiry, alerts.
--
-- A scheduled row is `pending` with `not_before` in the future; its run_after
-- is set to the same moment, so the claim (which only takes rows whose
-- run_after has come) needs no change to leave it alone.  `not_before` is
-- kept apart from run_after because run_after also carries retry backoffs:
-- only `not_before` makes a row "scheduled" (it is no backlog until then).
ALTER TABLE ai_marking_queue
    ADD COLUMN not_before timestamptz,
    ADD COLUMN expires_at timestamptz;

-- A row not dispatched by its expires_at ends `expired`: a new terminal state.
ALTER TABLE ai_marking_queue DROP CONSTRAINT IF EXISTS ai_marking_queue_status_check;
ALTER TABLE ai_marking_queue ADD CONSTRAINT ai_marking_queue_status_check
    CHECK (status IN ('pending', 'processing', 'completed', 'failed', 'cancelled', 'expired'));

-- Scheduled rows: counted by the stats, and when their wait starts (alerts).
CREATE INDEX ai_marking_queue_not_before_idx ON ai_marking_queue (not_before)
    WHERE status = 'pending' AND not_before IS NOT NULL;
-- The expiry sweep walks only the pending rows that can expire.
CREATE INDEX ai_marking_queue_expires_idx ON ai_marking_queue (expires_at)
    WHERE status = 'pending' AND expires_at IS NOT NULL;

-- Alerts: one row per incident.  While it is open (resolved_at NULL) no second
-- incident of the same alert and pool can open: the unique index is the wall
-- that two instances evaluating at once run into (the evaluation also runs
-- under an advisory lock, so normally only one of them tries).
CREATE TABLE ai_queue_alerts (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    alert text NOT NULL CHECK (alert IN ('backlog_age', 'stalled', 'failure_spike')),
    pool text NOT NULL DEFAULT 'default',
    kind text,
    value float8 NOT NULL,
    threshold float8 NOT NULL,
    opened_at timestamptz NOT NULL DEFAULT now(),
    resolved_at timestamptz
);
CREATE UNIQUE INDEX ai_queue_alerts_open_uniq ON ai_queue_alerts (alert, pool)
    WHERE resolved_at IS NULL;
CREATE INDEX ai_queue_alerts_opened_idx ON ai_queue_alerts (opened_at);

-- The outbox carries the new events; an alert names no assignment ('').
ALTER TABLE ai_marking_outbox DROP CONSTRAINT IF EXISTS ai_marking_outbox_type_check;
ALTER TABLE ai_marking_outbox ADD CONSTRAINT ai_marking_outbox_type_check
    CHECK (type IN ('marking.run_finished', 'marking.row_failed', 'marking.row_expired',
                    'marking.alert_opened', 'marking.alert_resolved'));
