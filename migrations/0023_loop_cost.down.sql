DROP INDEX IF EXISTS ai_marking_queue_processing_run_idx;
