-- Back to the schema before 0040: the full created and status list indexes,
-- and the completed index beside the finished one.
DROP INDEX IF EXISTS ai_marking_queue_list_idx;
DROP INDEX IF EXISTS ai_marking_queue_finished_idx;
CREATE INDEX ai_marking_queue_created_idx ON ai_marking_queue (created_at DESC, queue_id DESC);
CREATE INDEX ai_marking_queue_status_created_idx
    ON ai_marking_queue (status, created_at DESC, queue_id DESC);
CREATE INDEX ai_marking_queue_completed_idx ON ai_marking_queue (finished_at)
    INCLUDE (started_at) WHERE status = 'completed';
CREATE INDEX ai_marking_queue_finished_idx ON ai_marking_queue (status, finished_at)
    WHERE finished_at IS NOT NULL;
