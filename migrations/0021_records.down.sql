DROP INDEX IF EXISTS ai_marking_attempts_started_idx;
ALTER TABLE ai_queue_control DROP COLUMN IF EXISTS last_retain_at;
DROP TABLE IF EXISTS ai_marking_erasures;
