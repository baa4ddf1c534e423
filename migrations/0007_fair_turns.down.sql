-- aiqueue 0007 down: back to claiming by (priority, run_after, seq).
DROP TABLE IF EXISTS ai_marking_idempotency;
DROP TABLE IF EXISTS ai_marking_groups;
DROP INDEX IF EXISTS ai_marking_queue_claim_idx;
CREATE INDEX ai_marking_queue_claim_idx
    ON ai_marking_queue (priority DESC, run_after, seq) WHERE status = 'pending';
ALTER TABLE ai_marking_queue DROP COLUMN IF EXISTS turn, DROP COLUMN IF EXISTS group_key;
