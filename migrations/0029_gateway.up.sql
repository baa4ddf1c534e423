-- aiqueue 0029: slow marking, fallback between kinds, budget warnings.
-- * the `latency` alert (the last 15 minutes' p95 processing time);
-- * ordered fallback: a row dispatched as its kind's fallback kind carries it
--   (`run_kind`; NULL: its own kind) while it sits in that kind's pool, and its
--   dispatch line names the kind that ran it (`ran_kind`); a pool's control row
--   remembers since when it has refused every call (`refused_since`);
-- * `marking.budget_warning` in the outbox, sent once per cap, group, window
--   and threshold: ai_marking_budget_warnings remembers which were sent.
ALTER TABLE ai_queue_alerts DROP CONSTRAINT IF EXISTS ai_queue_alerts_alert_check;
ALTER TABLE ai_queue_alerts ADD CONSTRAINT ai_queue_alerts_alert_check
    CHECK (alert IN ('backlog_age', 'stalled', 'failure_spike', 'latency'));

ALTER TABLE ai_marking_attempts ADD COLUMN ran_kind text;
ALTER TABLE ai_marking_queue ADD COLUMN run_kind text;
ALTER TABLE ai_queue_control ADD COLUMN refused_since timestamptz;
-- A kind's rows on its fallback, found without reading every pending row.
CREATE INDEX ai_marking_queue_fallback_idx ON ai_marking_queue (kind, pool)
    WHERE run_kind IS NOT NULL AND status = 'pending';

ALTER TABLE ai_marking_outbox DROP CONSTRAINT IF EXISTS ai_marking_outbox_type_check;
ALTER TABLE ai_marking_outbox ADD CONSTRAINT ai_marking_outbox_type_check
    CHECK (type IN ('marking.run_finished', 'marking.row_failed', 'marking.row_expired',
                    'marking.alert_opened', 'marking.alert_resolved',
                    'marking.calibration_ready', 'marking.budget_warning'));

CREATE TABLE ai_marking_budget_warnings (
    cap text NOT NULL,
    pool text NOT NULL,
    -- '' for the pool's own daily cap
    group_key text NOT NULL,
    window_start timestamptz NOT NULL,
    threshold float8 NOT NULL,
    sent_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cap, pool, group_key, window_start, threshold)
);
CREATE INDEX ai_marking_budget_warnings_sent_idx ON ai_marking_budget_warnings (sent_at);
