-- The count triggers write into ai_marking_counts: unbind them with it.
DROP TRIGGER IF EXISTS ai_marking_queue_counts_ins ON ai_marking_queue;
DROP TRIGGER IF EXISTS ai_marking_queue_counts_del ON ai_marking_queue;
DROP TABLE IF EXISTS ai_marking_counts;
