DROP INDEX IF EXISTS ai_marking_queue_group_list_idx;
DROP INDEX IF EXISTS ai_marking_queue_assignment_list_idx;
