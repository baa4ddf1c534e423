-- The groups' triggers and functions (db/sql/functions/72_groups.sql) read the columns.
DROP TRIGGER IF EXISTS ai_marking_queue_group_done ON ai_marking_queue;
DROP TRIGGER IF EXISTS ai_marking_queue_group_left ON ai_marking_queue;
DROP TRIGGER IF EXISTS ai_marking_queue_group_erased ON ai_marking_queue;
DROP FUNCTION IF EXISTS aiqueue_group_done();
DROP FUNCTION IF EXISTS aiqueue_group_left();
DROP FUNCTION IF EXISTS aiqueue_group_complete(uuid);
DROP FUNCTION IF EXISTS aiqueue_group_lead(uuid, timestamptz);
DROP FUNCTION IF EXISTS aiqueue_answer_key(text, bytea, bytea);
DROP FUNCTION IF EXISTS aiqueue_answer_norm(text);
DROP INDEX IF EXISTS ai_marking_queue_leader_idx;
DROP INDEX IF EXISTS ai_marking_queue_answer_idx;
-- A follower still waiting goes back to being marked on its own.
UPDATE ai_marking_queue SET run_after = greatest(now(), not_before)
WHERE leader_id IS NOT NULL AND status = 'pending';
ALTER TABLE ai_marking_queue DROP COLUMN IF EXISTS leader_id,
    DROP COLUMN IF EXISTS answer_key;
