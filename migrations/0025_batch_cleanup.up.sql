-- aiqueue 0025: nothing of a student's left at a batch provider.
-- A deployment's own id, drawn once: every provider batch (and OpenAI input
-- file) is tagged with it and the batch's record id (aiqueue_batch_tag), so a
-- later step finds what a lost create made, and never another deployment's.
INSERT INTO aiqueue_meta (key, value)
VALUES ('deployment', replace(gen_random_uuid()::text, '-', ''))
ON CONFLICT (key) DO NOTHING;

-- 'clearing': the record's rows went back to waiting, but the provider may
-- still keep something of it (an uploaded file, a batch whose create timed
-- out): later steps look for it by the record and the tag and delete it.
ALTER TABLE ai_marking_batches DROP CONSTRAINT IF EXISTS ai_marking_batches_state_check;
ALTER TABLE ai_marking_batches ADD CONSTRAINT ai_marking_batches_state_check
    CHECK (state IN ('submitting', 'submitted', 'cancelling', 'ended', 'done', 'abandoned',
                     'clearing'));
