DROP TRIGGER IF EXISTS ai_marking_queue_counts_ins ON ai_marking_queue;
DROP TRIGGER IF EXISTS ai_marking_queue_counts_upd ON ai_marking_queue;
DROP TRIGGER IF EXISTS ai_marking_queue_counts_del ON ai_marking_queue;
DROP FUNCTION IF EXISTS aiqueue_count_changes();
DROP FUNCTION IF EXISTS aiqueue_count_move();
DROP TABLE IF EXISTS ai_marking_counts;
