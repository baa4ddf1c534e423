DROP INDEX IF EXISTS ai_marking_queue_completed_idx;
