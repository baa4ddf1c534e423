UPDATE ai_marking_batches SET state = 'abandoned' WHERE state = 'clearing';
ALTER TABLE ai_marking_batches DROP CONSTRAINT IF EXISTS ai_marking_batches_state_check;
ALTER TABLE ai_marking_batches ADD CONSTRAINT ai_marking_batches_state_check
    CHECK (state IN ('submitting', 'submitted', 'cancelling', 'ended', 'done', 'abandoned'));
DELETE FROM aiqueue_meta WHERE key = 'deployment';
