-- Back to the schema before 0013.  The trigger and its function go first: they
-- write to the outbox, and every status change would fail without it (the next
-- `migrate up` re-creates both from db/sql/functions.sql).
DROP TRIGGER IF EXISTS ai_marking_queue_outbox ON ai_marking_queue;
DROP FUNCTION IF EXISTS aiqueue_outbox_on_end();
DROP FUNCTION IF EXISTS aiqueue_outbox_run_finished(uuid, text);
DROP INDEX IF EXISTS ai_marking_queue_live_run_idx;
DROP TABLE IF EXISTS ai_marking_outbox;
