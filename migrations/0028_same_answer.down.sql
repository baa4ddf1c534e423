DROP INDEX IF EXISTS ai_marking_queue_leader_idx;
DROP INDEX IF EXISTS ai_marking_queue_answer_idx;
-- A follower still waiting goes back to being marked on its own.
UPDATE ai_marking_queue SET run_after = coalesce(not_before, now())
WHERE leader_id IS NOT NULL AND status = 'pending';
ALTER TABLE ai_marking_queue DROP COLUMN IF EXISTS leader_id,
    DROP COLUMN IF EXISTS answer_key;
