CREATE INDEX IF NOT EXISTS ai_marking_queue_assignment_idx
    ON ai_marking_queue (assignment_id, created_at DESC);
DROP INDEX IF EXISTS ai_marking_queue_group_list_idx;
DROP INDEX IF EXISTS ai_marking_queue_assignment_list_idx;
