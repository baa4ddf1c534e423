-- Back to the schema before 0018.  Expired rows become cancelled (the old schema
-- has no such state) and the new events leave the outbox.
DELETE FROM ai_marking_outbox
WHERE type IN ('marking.row_expired', 'marking.alert_opened', 'marking.alert_resolved');
ALTER TABLE ai_marking_outbox DROP CONSTRAINT IF EXISTS ai_marking_outbox_type_check;
ALTER TABLE ai_marking_outbox ADD CONSTRAINT ai_marking_outbox_type_check
    CHECK (type IN ('marking.run_finished', 'marking.row_failed'));
DROP TABLE IF EXISTS ai_queue_alerts;
UPDATE ai_marking_queue SET status = 'cancelled' WHERE status = 'expired';
ALTER TABLE ai_marking_queue DROP CONSTRAINT IF EXISTS ai_marking_queue_status_check;
ALTER TABLE ai_marking_queue ADD CONSTRAINT ai_marking_queue_status_check
    CHECK (status IN ('pending', 'processing', 'completed', 'failed', 'cancelled'));
DROP INDEX IF EXISTS ai_marking_queue_expires_idx;
DROP INDEX IF EXISTS ai_marking_queue_not_before_idx;
ALTER TABLE ai_marking_queue DROP COLUMN IF EXISTS not_before, DROP COLUMN IF EXISTS expires_at;
