-- Back to the schema before 0029: the new alert and event leave with their rows.
DROP TABLE IF EXISTS ai_marking_budget_warnings;
DELETE FROM ai_marking_outbox WHERE type = 'marking.budget_warning';
ALTER TABLE ai_marking_outbox DROP CONSTRAINT IF EXISTS ai_marking_outbox_type_check;
ALTER TABLE ai_marking_outbox ADD CONSTRAINT ai_marking_outbox_type_check
    CHECK (type ~ '^marking\.[a-z_]+$');  -- as 0027 left it
ALTER TABLE ai_marking_attempts DROP COLUMN IF EXISTS ran_kind;
ALTER TABLE ai_queue_control DROP COLUMN IF EXISTS refused_since;
-- Rows that ran as a fallback go back to their own kind's pool.
UPDATE ai_marking_queue q SET pool = h.pool
FROM (SELECT DISTINCT ON (kind) kind, pool FROM ai_marking_queue
      WHERE run_kind IS NULL ORDER BY kind, created_at DESC) h
WHERE q.run_kind IS NOT NULL AND q.status = 'pending' AND q.kind = h.kind;
ALTER TABLE ai_marking_queue DROP COLUMN IF EXISTS run_kind;
DELETE FROM ai_queue_alerts WHERE alert = 'latency';
ALTER TABLE ai_queue_alerts DROP CONSTRAINT IF EXISTS ai_queue_alerts_alert_check;
ALTER TABLE ai_queue_alerts ADD CONSTRAINT ai_queue_alerts_alert_check
    CHECK (alert IN ('backlog_age', 'stalled', 'failure_spike'));
