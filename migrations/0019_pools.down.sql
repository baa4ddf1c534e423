-- aiqueue 0019 rolled back: one kind, one pool, one control row.
ALTER TABLE ai_marking_results DROP COLUMN IF EXISTS kind, DROP COLUMN IF EXISTS pool;
ALTER TABLE ai_marking_counts DROP COLUMN IF EXISTS kind, DROP COLUMN IF EXISTS pool;
DELETE FROM ai_marking_groups WHERE pool <> 'default';
ALTER TABLE ai_marking_groups DROP CONSTRAINT ai_marking_groups_pkey;
ALTER TABLE ai_marking_groups DROP COLUMN pool;
ALTER TABLE ai_marking_groups ADD PRIMARY KEY (priority, group_key);
DROP INDEX IF EXISTS ai_marking_budget_pool_idx;
ALTER TABLE ai_marking_budget DROP COLUMN IF EXISTS pool;
DELETE FROM ai_queue_control WHERE id <> 1;
ALTER TABLE ai_queue_control DROP CONSTRAINT IF EXISTS ai_queue_control_pool_key;
ALTER TABLE ai_queue_control DROP COLUMN IF EXISTS pool;
ALTER TABLE ai_queue_control ADD CONSTRAINT ai_queue_control_id_check CHECK (id = 1);
DROP INDEX IF EXISTS ai_marking_queue_pool_lease_idx;
DROP INDEX ai_marking_queue_claim_idx;
CREATE INDEX ai_marking_queue_claim_idx
    ON ai_marking_queue (priority DESC, turn, seq) INCLUDE (run_after)
    WHERE status = 'pending';
ALTER TABLE ai_marking_queue DROP COLUMN IF EXISTS kind, DROP COLUMN IF EXISTS pool;
