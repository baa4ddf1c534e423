-- Back to the schema before 0038: canaries and drift alerts leave with their rows.
DROP INDEX IF EXISTS ai_queue_alerts_drift_uniq;
DELETE FROM ai_queue_alerts WHERE alert = 'drift';
DROP INDEX IF EXISTS ai_queue_alerts_open_uniq;
CREATE UNIQUE INDEX ai_queue_alerts_open_uniq ON ai_queue_alerts (alert, pool)
    WHERE resolved_at IS NULL;
ALTER TABLE ai_queue_alerts DROP CONSTRAINT IF EXISTS ai_queue_alerts_alert_check;
ALTER TABLE ai_queue_alerts ADD CONSTRAINT ai_queue_alerts_alert_check
    CHECK (alert IN ('backlog_age', 'stalled', 'failure_spike', 'latency'));
DROP TABLE IF EXISTS ai_marking_canary_rows;
-- CASCADE: the canary functions that return its rows go with it (migrate re-creates
-- the functions on the next up).
DROP TABLE IF EXISTS ai_marking_canary_runs CASCADE;
