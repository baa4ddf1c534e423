ALTER TABLE ai_marking_fair DROP COLUMN IF EXISTS due_at;
DROP INDEX IF EXISTS ai_marking_queue_group_kind_idx;
DROP INDEX IF EXISTS ai_marking_queue_processing_run_idx;
