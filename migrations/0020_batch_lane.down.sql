ALTER TABLE ai_marking_results DROP COLUMN IF EXISTS lane;
DROP INDEX IF EXISTS ai_marking_attempts_batch_idx;
DROP TABLE IF EXISTS ai_marking_batches;
DROP INDEX IF EXISTS ai_marking_queue_batch_idx;
DROP INDEX IF EXISTS ai_marking_queue_batch_wait_idx;
ALTER TABLE ai_marking_queue DROP COLUMN IF EXISTS batch_id,
    DROP COLUMN IF EXISTS deadline, DROP COLUMN IF EXISTS lane;
