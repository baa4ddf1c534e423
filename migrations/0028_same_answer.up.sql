-- aiqueue 0028: the same answer is marked once (docs/same-answer.md).
--
-- answer_key: an HMAC of the row's normalised answer under a key derived from
-- MARKING_QUEUE_SECRET (aiqueue/answers.py), computed by the enqueue from the
-- submission's content; the text itself is never stored.  NULL: the row is
-- marked on its own ("mark_each", or a submission without content).
-- leader_id: the row whose result this one will copy (a follower); NULL for
-- a leader and for a row of no group.  A follower waits with run_after =
-- 'infinity', which every claim and the batch packer already step over.
ALTER TABLE ai_marking_queue ADD COLUMN answer_key bytea, ADD COLUMN leader_id uuid;

-- The enqueue's look-up of the live leaders of a payload (none: 0), by answer.
CREATE INDEX ai_marking_queue_answer_idx
    ON ai_marking_queue ((coalesce(payload_id, 0)), answer_key)
    WHERE answer_key IS NOT NULL AND leader_id IS NULL
      AND status IN ('pending', 'processing');

-- A leader's followers, when it completes or hands over.
CREATE INDEX ai_marking_queue_leader_idx ON ai_marking_queue (leader_id, seq)
    WHERE leader_id IS NOT NULL AND status = 'pending';
